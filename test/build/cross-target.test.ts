import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binaryPlatform, filePlatform } from "../../runtime/build/binary-format.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { arm64Runner } from "./arm64-emulator.ts";
import { bareCopy, buildHandler, flags, ROOT, type Built } from "./built-binary.ts";

// Builds for linux-arm64 on this machine, run under qemu-user from an empty folder against a
// server on this machine; darwin builds checked by their headers (no macOS here to run them).
const ECHO = join(ROOT, "handlers/examples/echo.ts");
const TEXT = join(ROOT, "handlers/text/handler.ts");
const IMAGE = join(ROOT, "handlers/image/fast.ts");
const CLI = join(ROOT, "runtime/cli.ts");

const arm64: Record<"echo" | "text" | "image-fast", Built> = {} as never;
beforeAll(() => {
  arm64.echo = buildHandler(ECHO, ["--target", "linux-arm64"]);
  arm64.text = buildHandler(TEXT, ["--target", "linux-arm64"]);
  arm64["image-fast"] = buildHandler(IMAGE, ["--target", "linux-arm64"]);
}, 300_000);
afterAll(() => Object.values(arm64).forEach((b) => b?.[Symbol.dispose]()));

/** Every ELF or Mach-O header inside a file (the executable's own, and each embedded library's). */
function nativeHeaders(file: string): Array<{ at: number; os: string; arch: string }> {
  const bytes = readFileSync(file);
  const found: Array<{ at: number; os: string; arch: string }> = [];
  for (const magic of [
    [0x7f, 0x45, 0x4c, 0x46],
    [0xcf, 0xfa, 0xed, 0xfe],
  ]) {
    for (let at = bytes.indexOf(Buffer.from(magic)); at >= 0; at = bytes.indexOf(Buffer.from(magic), at + 1)) {
      const platform = binaryPlatform(bytes.subarray(at, at + 4096));
      if (platform) found.push({ at, os: platform.os, arch: platform.arch });
    }
  }
  return found.sort((a, b) => a.at - b.at);
}

/** A temp folder, removed when disposed. */
function tempDir(prefix: string): { dir: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `spool build` as a user runs it; the exit code and everything it printed. */
function build(args: string[], env: Record<string, string> = {}): { code: number; output: string } {
  const r = Bun.spawnSync([process.execPath, CLI, "build", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, output: r.stdout.toString() + r.stderr.toString() };
}

describe("spool build --target linux-arm64 on an x64 machine", () => {
  test("each binary is an aarch64 executable whose embedded libraries are all aarch64", () => {
    for (const built of Object.values(arm64)) {
      expect(filePlatform(built.binary)).toEqual({ format: "elf", os: "linux", arch: "arm64" });
      expect(built.output).toContain("for linux-arm64");
      expect(nativeHeaders(built.binary).filter((h) => h.arch !== "arm64")).toEqual([]);
    }
    expect(arm64["image-fast"].output).toContain("embedded onnxruntime-node/bin/napi-v6/linux/arm64/ (2 files,");
    expect(arm64["image-fast"].output).toContain("embedded @img/sharp-linux-arm64/lib/ (1 file,");
    expect(arm64["image-fast"].output).toContain("embedded @img/sharp-libvips-linux-arm64/lib/ (1 file,");
    expect(arm64.text.output).toMatch(/embedded @node-llama-cpp\/linux-arm64\/bins\/linux-arm64\/ \(\d+ files/);
    expect(arm64.text.output).not.toContain("linux-x64");
  });

  test("under qemu, alone in an empty folder, each does a job for a server on this machine", async () => {
    const runner = await arm64Runner();
    await using srv = await startTestServer({
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 },
      endpoints: {
        echo: { handler: ECHO, workersMax: 0 },
        text: { handler: TEXT, workersMax: 0 },
        "image-fast": { handler: IMAGE, workersMax: 0 },
      },
    });
    const jobs = {
      // nativeParts: the cache entries the first start extracts (echo has no native parts).
      echo: { input: { hello: "arm64" }, expected: { hello: "arm64" }, nativeParts: 0 },
      text: {
        input: { prompt: "Name a colour.", sampling_params: { max_tokens: 4, seed: 1 } },
        expected: [{ usage: { output: 4 } }],
        nativeParts: 1,
      },
      "image-fast": {
        input: { prompt: "a lighthouse", width: 256, height: 256, num_inference_steps: 1, seed: 7, image_format: "png" },
        expected: { image_url: expect.stringMatching(/^http/) },
        nativeParts: 1,
      },
    };
    for (const [endpoint, job] of Object.entries(jobs)) {
      using bare = bareCopy(arm64[endpoint as keyof typeof arm64].binary, runner);
      // --no-supervise: a supervised worker restarts itself as a child process, which qemu-user
      // cannot start without binfmt_misc (exit 127); on an arm64 host it runs as usual.
      await using _worker = bare.start([...flags(srv, endpoint), "--no-supervise"]);
      const [code, body] = await srv.json("POST", `/v2/${endpoint}/runsync?wait=240000`, { input: job.input });
      expect({ endpoint, code, status: body.status }).toEqual({ endpoint, code: 200, status: "COMPLETED" });
      expect(body.output).toMatchObject(job.expected);
      expect(existsSync(join(bare.dir, ".cache", "spool")) ? bare.cacheEntries().length : 0).toBe(job.nativeParts);
    }
  }, 600_000);
});

test("spool build --server --target linux-arm64: under qemu, the arm64 server runs a job on the arm64 echo worker", async () => {
  const runner = await arm64Runner();
  using tmp = tempDir("spool-arm64-server-");
  const server = join(tmp.dir, "spool");
  const r = build(["--server", "--target", "linux-arm64", "--outfile", server]);
  expect(r.code).toBe(0);
  expect(filePlatform(server)).toEqual({ format: "elf", os: "linux", arch: "arm64" });
  using bare = bareCopy(server, runner);
  writeFileSync(join(bare.dir, "spool.toml"), "[endpoints.echo]\n"); // no handler: its workers connect themselves
  await using proc = bare.start(["serve", "--port", "0", "--data", join(bare.dir, "data"), "--config", join(bare.dir, "spool.toml")]);
  const url = (await proc.waitFor(/Spool listening on (http:\/\/\S+)/))[1]!;
  const key = (await proc.waitFor(/^\s+(spool_\S+)\s*$/))[1]!;
  using worker = bareCopy(arm64.echo.binary, runner);
  await using _worker = worker.start(["--url", url, "--endpoint", "echo", "--api-key", key, "--no-supervise"]);
  const res = await fetch(`${url}/v2/echo/runsync?wait=120000`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: JSON.stringify({ input: { on: "arm64" } }),
  });
  expect(await res.json()).toMatchObject({ status: "COMPLETED", output: { on: "arm64" } });
}, 300_000);

describe("spool build for macOS on a Linux machine", () => {
  test("darwin-arm64: a Mach-O arm64 executable carrying only darwin-arm64 libraries (onnxruntime's, and sharp's fetched from npm)", () => {
    using tmp = tempDir("spool-darwin-");
    const dir = tmp.dir;
    const out = join(dir, "image-fast");
    // An empty cache of its own: sharp's darwin packages are fetched from the registry by this build.
    const r = build([IMAGE, "--target", "darwin-arm64", "--outfile", out], { SPOOL_CACHE_DIR: join(dir, "cache") });
    expect(r.code).toBe(0);
    const sharp = JSON.parse(readFileSync(join(ROOT, "node_modules/sharp/package.json"), "utf8")).optionalDependencies;
    const fetched = join(
      dir,
      "cache/spool/packages/darwin-arm64",
      `@img+sharp-darwin-arm64@${sharp["@img/sharp-darwin-arm64"]}`,
      "node_modules/@img",
    );
    expect(r.output).toContain(
      `fetching @img/sharp-darwin-arm64@${sharp["@img/sharp-darwin-arm64"]} for darwin-arm64 from the npm registry into ${join(dir, "cache/spool/packages/darwin-arm64")}`,
    );
    expect(readdirSync(fetched).sort()).toEqual(["sharp-darwin-arm64", "sharp-libvips-darwin-arm64"]);
    expect(filePlatform(out)).toEqual({ format: "mach-o", os: "darwin", arch: "arm64" });
    expect(r.output).toContain("embedded onnxruntime-node/bin/napi-v6/darwin/arm64/ (3 files,");
    expect(r.output).toContain("embedded @img/sharp-darwin-arm64/lib/ (1 file,");
    expect(r.output).toContain("embedded @img/sharp-libvips-darwin-arm64/lib/ (1 file,"); // found through the addon's @rpath
    const headers = nativeHeaders(out);
    expect(headers.filter((h) => h.os !== "darwin" || h.arch !== "arm64")).toEqual([]);
    const embedded = Number(/native parts: (\d+) files/.exec(r.output)![1]);
    expect(headers.length).toBe(1 + embedded); // the executable, then each embedded library
  }, 120_000);

  test("darwin-x64: a Mach-O x64 executable", () => {
    using tmp = tempDir("spool-darwin-");
    const dir = tmp.dir;
    const out = join(dir, "echo");
    expect(build([ECHO, "--target", "darwin-x64", "--outfile", out]).code).toBe(0);
    expect(filePlatform(out)).toEqual({ format: "mach-o", os: "darwin", arch: "x64" });
    expect(nativeHeaders(out).filter((h) => h.os !== "darwin" || h.arch !== "x64")).toEqual([]);
  }, 120_000);
});

describe("a target the parts do not exist for", () => {
  test("stops the build before anything is written, naming the part and the platforms it has", () => {
    using tmp = tempDir("spool-nobuild-");
    const dir = tmp.dir;
    const out = join(dir, "worker");
    const image = build([IMAGE, "--target", "darwin-x64", "--outfile", out]);
    expect(image.code).toBe(1);
    expect(image.output).toContain("spool build failed; no binary was made");
    expect(image.output).toContain("onnxruntime-node has no prebuilt for darwin-x64");
    expect(image.output).toContain("it has prebuilts for: darwin-arm64, linux-arm64, linux-x64, win32-arm64, win32-x64");

    const cuda = build([TEXT, "--target", "linux-arm64", "--gpu", "cuda", "--outfile", out]);
    expect(cuda.code).toBe(1);
    expect(cuda.output).toContain(
      "node-llama-cpp has no cuda prebuilt for linux-arm64 (@node-llama-cpp/linux-arm64-cuda is not published); it has cuda prebuilts for: linux-x64, win32-x64",
    );

    const ortCuda = build([IMAGE, "--target", "linux-arm64", "--gpu", "cuda", "--outfile", out]);
    expect(ortCuda.code).toBe(1);
    expect(ortCuda.output).toContain(
      "onnxruntime-node has no CUDA prebuilt for linux-arm64; its CUDA provider exists for: linux-x64, win32-x64",
    );
    expect(readdirSync(dir)).toEqual([]);
  }, 120_000);

  test("an unknown target is a usage error listing the targets", () => {
    const r = build([ECHO, "--target", "windows-x64", "--outfile", "/nonexistent/x"]);
    expect(r).toEqual({ code: 2, output: "--target must be one of linux-x64, linux-arm64, darwin-arm64, darwin-x64, got windows-x64\n" });
    expect(existsSync("/nonexistent/x")).toBe(false);
  });
});
