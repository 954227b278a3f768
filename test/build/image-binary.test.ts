import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { bareCopy, buildHandler, flags, ROOT, runpodEnv } from "./built-binary.ts";

// One build for the whole file: builds are slow.
const built = buildHandler(join(ROOT, "handlers/image/fast.ts"));
afterAll(() => built[Symbol.dispose]());

const polling = { server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 } };
const input = { prompt: "a lighthouse at dusk", width: 256, height: 256, seed: 7, image_format: "png" };

/** A 256x256 runsync; returns the PNG the job's URL serves. */
async function generate(srv: TestServer, endpoint: string): Promise<{ body: any; png: Buffer }> {
  const [code, body] = await srv.json("POST", `/v2/${endpoint}/runsync?wait=120000`, { input });
  expect(code).toBe(200);
  expect(body).toMatchObject({ status: "COMPLETED" });
  const res = await fetch(body.output.image_url);
  expect(res.status).toBe(200);
  const png = Buffer.from(await res.arrayBuffer());
  return { body, png };
}

function expectPng(png: Buffer, width: number, height: number): void {
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([width, height]); // IHDR
}

describe("the image-fast binary", () => {
  test("the build embeds onnxruntime and sharp with their libraries and reports each part", () => {
    expect(built.output).toContain("embedded onnxruntime-node/bin/napi-v6/linux/x64/ (2 files,");
    expect(built.output).toContain("embedded @img/sharp-linux-x64/lib/ (1 file,");
    expect(built.output).toContain("embedded @img/sharp-libvips-linux-x64/lib/ (1 file,");
    expect(built.output).toMatch(new RegExp(`built ${built.binary} for ${process.platform}-${process.arch} \\(\\d+\\.\\d MB\\)`));
  });

  test("alone in an empty dir under env -i: flags, then RunPod's env contract reusing the cache, then a tampered cache repaired", async () => {
    using bare = bareCopy(built.binary);
    await using srv = await startTestServer({ ...polling, endpoints: { "image-fast": { workersMax: 0 } } });

    // First start, with flags: extracts into $HOME/.cache/spool and answers a 256x256 job with a PNG.
    {
      await using _worker = bare.start(flags(srv, "image-fast"));
      const { png } = await generate(srv, "image-fast");
      expectPng(png, 256, 256);
    }
    const [entry] = bare.cacheEntries();
    expect(bare.cacheEntries()).toHaveLength(1);
    const lib = join(entry!, "onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1");
    const first = statSync(lib);

    // Second start, from RunPod's environment alone: the same cache entry, not written again.
    {
      await using _worker = bare.start([], runpodEnv(srv, "image-fast", "pod-img"));
      const { body, png } = await generate(srv, "image-fast");
      expect(body.workerId).toBe("pod-img");
      expectPng(png, 256, 256);
    }
    expect(bare.cacheEntries()).toEqual([entry!]);
    expect([statSync(lib).ino, statSync(lib).mtimeMs]).toEqual([first.ino, first.mtimeMs]);

    // A changed file in the cache is noticed at start and the entry extracted again.
    const addon = join(entry!, "@img/sharp-linux-x64/lib");
    const node = join(addon, readFileSync(join(entry!, ".spool-native.json"), "utf8").match(/sharp-linux-x64-[\d.]+\.node/)![0]);
    const original = readFileSync(node);
    writeFileSync(node, "not an ELF file");
    {
      await using _worker = bare.start(flags(srv, "image-fast"));
      expectPng((await generate(srv, "image-fast")).png, 256, 256);
    }
    expect(readFileSync(node).equals(original)).toBe(true);
  }, 120_000);

  test("the scaler runs the built binary as an endpoint's handler", async () => {
    using bare = bareCopy(built.binary);
    // Without a sandbox, workers the scaler starts get the server's SPOOL_CACHE_DIR: keep their cache in the temp dir.
    const saved = process.env.SPOOL_CACHE_DIR;
    process.env.SPOOL_CACHE_DIR = bare.dir;
    using _restore = {
      [Symbol.dispose]: () => void (saved === undefined ? delete process.env.SPOOL_CACHE_DIR : (process.env.SPOOL_CACHE_DIR = saved)),
    };
    await using srv = await startTestServer({
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000 },
      endpoints: { "image-fast": { handler: bare.exe, workersMin: 0, workersMax: 1, idleTimeout: 60 } },
    });
    expectPng((await generate(srv, "image-fast")).png, 256, 256);
    // In a sandbox its native libraries are cached in the endpoint's own folder, the one place it may write.
    const cache = srv.server.sandbox === "bubblewrap" ? join(srv.dataDir, "endpoints", "image-fast", "cache") : bare.dir;
    expect(readdirSync(join(cache, "spool")).filter((n) => n.startsWith("native-"))).toHaveLength(1);
  }, 120_000);
});
