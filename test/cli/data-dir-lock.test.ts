import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess } from "../helpers/spawned.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

test("one spool serve per data directory: a second exits at once naming the holder's pid, keys and usage still work beside it, and a killed server's restart is not blocked", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-lock-"));
  try {
    const data = join(dir, "data");
    const config = join(dir, "spool.toml");
    writeFileSync(config, "[server]\n"); // no endpoints: no workers to start
    const serve = () => spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", data, "--config", config]);
    await using first = serve();
    await first.waitFor(/Spool listening on/);

    const second = Bun.spawnSync([process.execPath, CLI, "serve", "--port", "0", "--data", data, "--config", config], { stderr: "pipe" });
    expect(second.exitCode).toBe(2);
    expect(second.stderr.toString()).toBe(
      `spool: data directory ${data} is in use by another spool serve (pid ${first.proc.pid}): stop it, or give this one its own --data\n(spool serve --help lists its options)\n`,
    );

    for (const args of [["keys", "list"], ["usage"]]) {
      const beside = Bun.spawnSync([process.execPath, CLI, ...args, "--data", data, "--config", config], { stderr: "pipe" });
      expect({ args, exitCode: beside.exitCode }).toEqual({ args, exitCode: 0 });
    }

    first.proc.kill("SIGKILL");
    await first.proc.exited;
    await using third = serve();
    await third.waitFor(/Spool listening on/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
