import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

test("spool serve refuses, at once and by name, an endpoint that needs a GPU where it has none", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-gpu-refusal-"));
  try {
    const config = join(dir, "spool.toml");
    writeFileSync(
      config,
      `[server]\ngpus = []\n\n[endpoints.img]\nhandler = "${resolve(import.meta.dir, "../../handlers/image/fast.ts")}"\n[endpoints.img.options]\ndevice = "cuda"\n`,
    );
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--port", "0", "--data", join(dir, "data"), "--config", config], {
      stdout: "pipe",
      stderr: "pipe",
      stdin: "ignore",
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, out }).toEqual({ code: 2, out: "" });
    expect(err).toStartWith(
      `spool: ${config}: endpoints.img: each worker needs 1 GPU (options.device = "cuda"), and server.gpus lists none: set server.gpus, gpusPerWorker or gpuMemoryMb, or options.device = "cpu"\n`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
