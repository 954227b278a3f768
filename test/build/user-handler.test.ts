import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bareCopy, buildHandler, ROOT } from "./built-binary.ts";

const built = buildHandler(join(ROOT, "test/fixtures/sharp-handler.ts"));
afterAll(() => built[Symbol.dispose]());

describe("a user handler with native packages", () => {
  test("one that imports sharp builds into one file that runs alone under env -i", async () => {
    expect(built.output).toContain("embedded @img/sharp-libvips-linux-x64/lib/ (1 file,");
    using bare = bareCopy(built.binary);
    await using run = bare.start(["--input", JSON.stringify({ width: 5, height: 3 })]);
    expect(await run.proc.exited).toBe(0);
    const json = run.lines.slice(run.lines.indexOf("{")).join("\n");
    expect(JSON.parse(json)).toEqual({ format: "png", width: 5, height: 3, dominant: { r: 200, g: 8, b: 56 }, versions: true });
  }, 60_000);

  test("--gpu cuda without onnxruntime's CUDA libraries fails the build with the command that installs them", () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-gpu-"));
    try {
      const outfile = join(dir, "image-cuda");
      const r = Bun.spawnSync([process.execPath, join(ROOT, "runtime/cli.ts"), "build", join(ROOT, "handlers/image/fast.ts"), "--gpu", "cuda", "--outfile", outfile], { cwd: ROOT });
      const out = r.stdout.toString() + r.stderr.toString();
      expect(r.exitCode).toBe(1);
      expect(out).toContain("onnxruntime-node has no CUDA provider libraries (libonnxruntime_providers_cuda.so");
      expect(out).toContain("ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js");
      expect(existsSync(outfile)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
