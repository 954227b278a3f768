import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startTestServer } from "../../helpers/test-server.ts";

const ROOT = resolve(import.meta.dir, "../../..");

test("the scaler starts workers from a binary built by `spool build`, from zero", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-binary-"));
  try {
    const binary = join(dir, "echo-worker");
    const built = Bun.spawnSync([
      process.execPath,
      join(ROOT, "runtime/cli.ts"),
      "build",
      join(ROOT, "handlers/examples/echo.ts"),
      "--outfile",
      binary,
    ]);
    expect(built.exitCode).toBe(0);
    await using srv = await startTestServer({
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000 },
      endpoints: { bin: { handler: binary, workersMax: 1 } },
    });
    expect((await srv.json("GET", "/v2/bin/health"))[1].workers).toEqual({ idle: 0, running: 0, initializing: 0, unhealthy: 0 });
    const [code, body] = await srv.json("POST", "/v2/bin/runsync", { input: { from: "binary" } });
    expect(code).toBe(200);
    expect(body).toMatchObject({ status: "COMPLETED", output: { from: "binary" }, workerId: expect.stringMatching(/^bin-/) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
