import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess } from "../helpers/spawned.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

test("a second spool serve on a port in use exits 2 naming the port, and the first keeps every request", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-port-"));
  try {
    const config = join(dir, "spool.toml");
    writeFileSync(config, '[server]\nhost = "0.0.0.0"\n'); // no endpoints: no workers to start
    await using first = spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", join(dir, "a"), "--config", config]);
    const [, url, port] = await first.waitFor(/Spool listening on (http:\/\/\S+:(\d+))/);
    const second = Bun.spawnSync([process.execPath, CLI, "serve", "--port", port!, "--data", join(dir, "b"), "--config", config], {
      stderr: "pipe",
      timeout: 60_000,
    });
    expect(second.exitCode).toBe(2);
    expect(second.stderr.toString()).toStartWith(
      `spool: port ${port} on 0.0.0.0 is in use by another process: stop it, or give this server another --port\n`,
    );
    // Only the first server answers: its key works on every request.
    const key = /spool_[A-Za-z0-9_-]+/.exec(first.lines.join("\n"))![0];
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${url}/v2/none/health`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(404); // known key, no such endpoint
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
