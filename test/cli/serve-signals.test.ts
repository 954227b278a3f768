import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess } from "../helpers/spawned.ts";
import { until } from "../helpers/until.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");
const HOLD = resolve(import.meta.dir, "../fixtures/hold-fixture.ts");

test("a second SIGTERM to spool serve exits at once, without waiting for a worker's drain", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-signals-"));
  try {
    const config = join(dir, "spool.toml");
    // The worker's job runs until its signal fires, which a drain gives it only after 30 s.
    writeFileSync(config, `[server]\nhost = "127.0.0.1"\n\n[endpoints.ep]\nhandler = "${HOLD}"\nworkersMax = 1\n`);
    await using serve = spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", join(dir, "data"), "--config", config]);
    const [, url] = await serve.waitFor(/Spool listening on (http:\/\/\S+)/);
    const key = /spool_[A-Za-z0-9_-]+/.exec(serve.lines.join("\n"))![0];
    const headers = { authorization: `Bearer ${key}` };
    const { id } = (await (
      await fetch(`${url}/v2/ep/run`, { method: "POST", headers, body: JSON.stringify({ input: { hold: true } }) })
    ).json()) as { id: string };
    await until(
      async () => ((await (await fetch(`${url}/v2/ep/status/${id}`, { headers })).json()) as { status: string }).status === "IN_PROGRESS",
      "the job to run",
      60_000,
    );

    serve.proc.kill("SIGTERM");
    await serve.waitFor(/workers drain their jobs first/);
    serve.proc.kill("SIGTERM");
    expect(await serve.proc.exited).toBe(1);
    expect(serve.lines).toContain("spool: stopping now, without waiting for workers to drain");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);
