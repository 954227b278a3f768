import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DiskSpaceError, downloadFromHub } from "../../../handlers/image/hub-download.ts";
import { FluxPipeline } from "../../../handlers/image/pipeline.ts";
import { makeTinyFlux } from "../../../handlers/image/tiny-model/make-tiny-flux.ts";

const dir = mkdtempSync(join(tmpdir(), "spool-hub-"));
const source = join(dir, "source");
let hub: FakeHub;
afterAll(() => {
  hub?.server.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

interface FakeHub {
  server: ReturnType<typeof Bun.serve>;
  url: string;
  /** method, path and Range header of every request, in order. */
  requests: string[];
  /** End the next GET of this file after this many bytes (an interrupted transfer). */
  cut: Map<string, number>;
  /** Files listed without a size in the API (the client must HEAD them). */
  unsized: Set<string>;
}

const tree = (root: string): string[] =>
  readdirSync(root, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tree(join(root, e.name)).map((f) => `${e.name}/${f}`) : [e.name]));

/** A real HTTP server in the hub's URL layout (/api/models/ID, /ID/resolve/SHA/PATH) serving `source`, with Range support. */
function startHub(id: string): FakeHub {
  const requests: string[] = [];
  const cut = new Map<string, number>();
  const unsized = new Set<string>();
  const files = tree(source);
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const path = new URL(req.url).pathname;
      requests.push(`${req.method} ${path}${req.headers.get("range") ? ` ${req.headers.get("range")}` : ""}`);
      if (path === `/api/models/${id}`) {
        return Response.json({ id, sha: "c0ffee", siblings: files.map((f) => (unsized.has(f) ? { rfilename: f } : { rfilename: f, size: statSync(join(source, f)).size })) });
      }
      const prefix = `/${id}/resolve/c0ffee/`;
      if (!path.startsWith(prefix) || !files.includes(path.slice(prefix.length))) return new Response("not found", { status: 404 });
      const file = path.slice(prefix.length);
      const bytes = readFileSync(join(source, file));
      if (req.method === "HEAD") return new Response(null, { headers: { "x-linked-size": String(bytes.length) } });
      const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
      const from = range ? Number(range[1]) : 0;
      const body = bytes.subarray(from);
      const stopAt = cut.get(file);
      if (stopAt !== undefined) {
        cut.delete(file);
        // the transfer ends early: the client holds only the first stopAt bytes
        return new Response(body.subarray(0, stopAt), { status: range ? 206 : 200 });
      }
      return new Response(body, range ? { status: 206, headers: { "content-range": `bytes ${from}-${bytes.length - 1}/${bytes.length}` } } : {});
    },
  });
  return { server, url: `http://127.0.0.1:${server.port}`, requests, cut, unsized };
}

const sink = () => {
  const lines: string[] = [];
  return { lines, write: (t: string) => lines.push(t) };
};

beforeAll(async () => {
  await makeTinyFlux(source, { variant: "schnell", externalData: "model.onnx_data" });
});

describe("hub downloads", () => {
  test("a model in the hub's layout downloads once, with progress in bytes and rate, and loads", async () => {
    hub = startHub("owner/tiny");
    const target = join(dir, "once");
    const out = sink();
    await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out });
    expect(tree(target).filter((f) => f !== ".spool-complete").sort()).toEqual(tree(source).sort());
    for (const f of tree(source)) expect(readFileSync(join(target, f)).equals(readFileSync(join(source, f)))).toBe(true);
    expect(out.lines.at(-1)).toMatch(/^\rdownloading owner\/tiny: done, 0\.00 GB at [\d.]+ MB\/s/);
    expect(out.lines.some((l) => /\] \d+% [\d.]+\/[\d.]+ GB [\d.]+ MB\/s /.test(l))).toBe(true);
    const requests = hub.requests.length;
    await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out });
    expect(hub.requests.length).toBe(requests); // reused: not even the API is asked
    const pipeline = await FluxPipeline.load(target, { device: "cpu", maxSequenceLength: 256 });
    await pipeline.dispose();
    hub.server.stop(true);
  });

  test("an interrupted file resumes with an HTTP Range from where it stopped; finished files are not fetched again", async () => {
    hub = startHub("owner/tiny");
    const target = join(dir, "resume");
    const big = "transformer/model.onnx_data";
    const size = statSync(join(source, big)).size;
    hub.cut.set(big, 4096);
    const env = { HF_ENDPOINT: hub.url };
    await expect(downloadFromHub("owner/tiny", target, { env, out: sink() })).rejects.toThrow(`hub model owner/tiny: ${big}: got 4096 of ${size} bytes; run again to resume`);
    expect(statSync(join(target, `${big}.part`)).size).toBe(4096);
    expect(existsSync(join(target, ".spool-complete"))).toBe(false);
    const before = hub.requests.length;
    await downloadFromHub("owner/tiny", target, { env, out: sink() });
    const again = hub.requests.slice(before).filter((r) => r.startsWith("GET /owner/tiny/resolve/"));
    expect(again).toContain(`GET /owner/tiny/resolve/c0ffee/${big} bytes=4096-`);
    // files finished before the cut were not downloaded again
    const firstRun = hub.requests.slice(0, before).filter((r) => r.startsWith("GET /owner/tiny/resolve/")).map((r) => r.split(" ")[1]!);
    const finishedFirst = firstRun.filter((p) => !p.endsWith(big));
    for (const p of finishedFirst) expect(again.map((r) => r.split(" ")[1])).not.toContain(p);
    expect(readFileSync(join(target, big)).equals(readFileSync(join(source, big)))).toBe(true);
    expect(statSync(join(target, big)).size).toBe(size);
    hub.server.stop(true);
  });

  test("sizes are read before any byte is written, by HEAD when the listing lacks one; a download that cannot fit is refused", async () => {
    hub = startHub("owner/tiny");
    hub.unsized.add("transformer/model.onnx_data");
    const total = tree(source).reduce((n, f) => n + statSync(join(source, f)).size, 0);
    const target = join(dir, "full");
    const quota = async () => total - 1; // a disk one byte too small
    const error = await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, freeBytes: quota, out: sink() }).catch((e) => e);
    expect(error).toBeInstanceOf(DiskSpaceError);
    expect(error.message).toBe(
      `hub model owner/tiny needs 0.00 GB more on ${target} (0.00 GB in ${tree(source).length} files, 0.00 GB already there) but only 0.00 GB is free: free space or set the endpoint's options.cacheDir to a larger disk`,
    );
    expect(hub.requests).toContain("HEAD /owner/tiny/resolve/c0ffee/transformer/model.onnx_data");
    expect(hub.requests.filter((r) => r.startsWith("GET /owner/tiny/resolve/"))).toEqual([]);
    expect(tree(target)).toEqual([]);
    // exactly enough room is enough
    await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, freeBytes: async () => total, out: sink() });
    expect(existsSync(join(target, ".spool-complete"))).toBe(true);
    hub.server.stop(true);
  });

  test("the space check counts what an interrupted download already holds", async () => {
    hub = startHub("owner/tiny");
    const target = join(dir, "partial");
    const big = "transformer/model.onnx_data";
    hub.cut.set(big, 4096);
    await expect(downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out: sink() })).rejects.toThrow();
    const total = tree(source).reduce((n, f) => n + statSync(join(source, f)).size, 0);
    const held = tree(target).reduce((n, f) => n + statSync(join(target, f)).size, 0);
    expect(held).toBeGreaterThan(4096);
    await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, freeBytes: async () => total - held, out: sink() });
    expect(readFileSync(join(target, big)).equals(readFileSync(join(source, big)))).toBe(true);
    hub.server.stop(true);
  });
});
