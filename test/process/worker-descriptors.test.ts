import { afterAll, beforeAll, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLog } from "../../runtime/log.ts";
import { LocalProcessProvider } from "../../runtime/server/scaling/local-process-provider.ts";
import { ensureBubblewrap, SANDBOXES } from "../helpers/sandbox.ts";

const dir = mkdtempSync(join(tmpdir(), "spool-fds-"));
// A "built worker" that exits at once: each start and end is all the provider does.
const quick = join(dir, "quick-worker");
writeFileSync(quick, "#!/bin/sh\nexit 0\n");
chmodSync(quick, 0o755);
beforeAll(ensureBubblewrap);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Descriptors open now; the pipes Bun made for stdin and stderr are closed when their objects are collected, so collect first. */
const openDescriptors = () => {
  Bun.gc(true);
  return readdirSync("/proc/self/fd").length;
};

for (const sandbox of SANDBOXES) {
  test(`the server's open descriptors after 200 worker restarts equal those after 10 (sandbox: ${sandbox})`, async () => {
    const provider = new LocalProcessProvider({ log: silentLog, sandbox: sandbox === "bubblewrap" ? { hidden: [] } : undefined });
    const run = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const handle = provider.start({
          endpointId: "ep",
          workerId: `w${i}`,
          handler: quick,
          serverUrl: "http://127.0.0.1:1",
          apiKey: "k",
          env: {},
          scratchDir: join(dir, "scratch"),
        });
        expect(await handle.exited).toBe(0);
      }
    };
    await run(10);
    const after10 = openDescriptors();
    await run(190);
    expect(openDescriptors()).toBe(after10);
  }, 60_000);
}
