import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ortCudaProvider } from "../helpers/gpu.ts";
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
    expect(bare.cacheEntries()).toHaveLength(1);

    // A cache dir that cannot be created: the binary says so and extracts into the temp dir.
    writeFileSync(join(bare.dir, "not-a-dir"), "");
    await using fallback = bare.start(["--input", JSON.stringify({ width: 2, height: 2 })], {
      SPOOL_CACHE_DIR: join(bare.dir, "not-a-dir"),
      TMPDIR: join(bare.dir, "tmp"),
    });
    expect(await fallback.proc.exited).toBe(0);
    expect(fallback.lines.join("\n")).toContain(`spool: native cache ${join(bare.dir, "not-a-dir", "spool")} is not usable (ENOTDIR`);
    expect(readdirSync(join(bare.dir, "tmp", `spool-cache-${process.getuid!()}`)).filter((n) => n.startsWith("native-"))).toHaveLength(1);
  }, 60_000);

  test.if(!ortCudaProvider())(
    "--gpu cuda without onnxruntime's CUDA libraries fails the build with the command that installs them",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "spool-gpu-"));
      try {
        const outfile = join(dir, "image-cuda");
        const r = Bun.spawnSync(
          [
            process.execPath,
            join(ROOT, "runtime/cli.ts"),
            "build",
            join(ROOT, "handlers/image/fast.ts"),
            "--gpu",
            "cuda",
            "--outfile",
            outfile,
          ],
          { cwd: ROOT },
        );
        const out = r.stdout.toString() + r.stderr.toString();
        expect(r.exitCode).toBe(1);
        expect(out).toContain("onnxruntime-node has no CUDA provider libraries (libonnxruntime_providers_cuda.so");
        expect(out).toContain("ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js");
        expect(existsSync(outfile)).toBe(false);
        expect(readdirSync(dir)).toEqual([]); // no partial file left behind either
        // A failed build leaves an earlier binary at the same path as it was.
        writeFileSync(outfile, "an earlier build");
        const again = Bun.spawnSync(
          [
            process.execPath,
            join(ROOT, "runtime/cli.ts"),
            "build",
            join(ROOT, "handlers/image/fast.ts"),
            "--gpu",
            "cuda",
            "--outfile",
            outfile,
          ],
          { cwd: ROOT },
        );
        expect(again.exitCode).toBe(1);
        expect(readFileSync(outfile, "utf8")).toBe("an earlier build");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
