import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { DiskSpaceError, downloadFromHub } from "../../../handlers/image/hub-download.ts";
import { LOCK_POLL_MS } from "../../../handlers/image/model-dir-lock.ts";
import { ManualClock } from "../../../runtime/clock.ts";
import { spawnProcess } from "../../helpers/spawned.ts";
import { until } from "../../helpers/until.ts";
import { FluxPipeline } from "../../../handlers/image/pipeline.ts";
import { makeTinyFlux } from "../../../handlers/image/tiny-model/make-tiny-flux.ts";

/** This machine's pid namespace and boot, as a lock written here records them. */
const here = { ns: readlinkSync("/proc/self/ns/pid"), boot: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() };

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
  /** Hold the next GET of this file after its first half until the promise resolves (a transfer in progress). */
  hold: Map<string, Promise<void>>;
  /** More names the listing carries (what a malicious mirror could list). */
  extra: string[];
}

const tree = (root: string): string[] =>
  readdirSync(root, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tree(join(root, e.name)).map((f) => `${e.name}/${f}`) : [e.name],
  );

/** A real HTTP server in the hub's URL layout (/api/models/ID, /ID/resolve/SHA/PATH) serving `source`, with Range support. */
function startHub(id: string): FakeHub {
  const requests: string[] = [];
  const cut = new Map<string, number>();
  const unsized = new Set<string>();
  const hold = new Map<string, Promise<void>>();
  const extra: string[] = [];
  const files = tree(source);
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const path = new URL(req.url).pathname;
      requests.push(`${req.method} ${path}${req.headers.get("range") ? ` ${req.headers.get("range")}` : ""}`);
      if (path === `/api/models/${id}`) {
        return Response.json({
          id,
          sha: "c0ffee",
          siblings: [
            ...files.map((f) => (unsized.has(f) ? { rfilename: f } : { rfilename: f, size: statSync(join(source, f)).size })),
            ...extra.map((f) => ({ rfilename: f, size: 1 })),
          ],
        });
      }
      const prefix = `/${id}/resolve/c0ffee/`;
      if (!path.startsWith(prefix) || !files.includes(path.slice(prefix.length))) return new Response("not found", { status: 404 });
      const file = path.slice(prefix.length);
      const bytes = readFileSync(join(source, file));
      if (req.method === "HEAD") return new Response(null, { headers: { "x-linked-size": String(bytes.length) } });
      const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
      const from = range ? Number(range[1]) : 0;
      const body = bytes.subarray(from);
      const held = hold.get(file);
      if (held) {
        hold.delete(file);
        const half = Math.floor(body.length / 2);
        const stream = new ReadableStream({
          async start(c) {
            c.enqueue(body.subarray(0, half));
            await held;
            c.enqueue(body.subarray(half));
            c.close();
          },
        });
        return new Response(stream, { status: range ? 206 : 200 });
      }
      const stopAt = cut.get(file);
      if (stopAt !== undefined) {
        cut.delete(file);
        // the transfer ends early: the client holds only the first stopAt bytes
        return new Response(body.subarray(0, stopAt), { status: range ? 206 : 200 });
      }
      return new Response(
        body,
        range ? { status: 206, headers: { "content-range": `bytes ${from}-${bytes.length - 1}/${bytes.length}` } } : {},
      );
    },
  });
  return { server, url: `http://127.0.0.1:${server.port}`, requests, cut, unsized, hold, extra };
}

/** The error a promise rejects with (and a test failure if it resolves). */
const rejection = (p: Promise<unknown>): Promise<Error> =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: Error) => e,
  );

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
    expect(
      tree(target)
        .filter((f) => f !== ".spool-complete")
        .sort(),
    ).toEqual(tree(source).sort());
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
    await expect(downloadFromHub("owner/tiny", target, { env, out: sink() })).rejects.toThrow(
      `hub model owner/tiny: ${big}: got 4096 of ${size} bytes; run again to resume`,
    );
    expect(statSync(join(target, `${big}.part`)).size).toBe(4096);
    expect(existsSync(join(target, ".spool-complete"))).toBe(false);
    const before = hub.requests.length;
    await downloadFromHub("owner/tiny", target, { env, out: sink() });
    const again = hub.requests.slice(before).filter((r) => r.startsWith("GET /owner/tiny/resolve/"));
    expect(again).toContain(`GET /owner/tiny/resolve/c0ffee/${big} bytes=4096-`);
    // files finished before the cut were not downloaded again
    const firstRun = hub.requests
      .slice(0, before)
      .filter((r) => r.startsWith("GET /owner/tiny/resolve/"))
      .map((r) => r.split(" ")[1]!);
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
    const error = await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, freeBytes: quota, out: sink() }).catch(
      (e) => e,
    );
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

  test("two processes downloading the same model at once both end with the whole model, fetched once", async () => {
    hub = startHub("owner/tiny");
    const target = join(dir, "twice");
    const big = "transformer/model.onnx_data";
    let release = () => {};
    hub.hold.set(big, new Promise<void>((resolve) => (release = resolve)));
    const start = () => spawnProcess([process.execPath, join(import.meta.dir, "hub-download-fixture.ts"), "owner/tiny", target, hub.url]);
    await using first = start();
    await until(() => hub.requests.includes(`GET /owner/tiny/resolve/c0ffee/${big}`), "the first process fetching the large file");
    await using second = start();
    // The second process has chosen its course: fetching the same file too, or waiting for the first.
    await until(
      () =>
        hub.requests.filter((r) => r.startsWith(`GET /owner/tiny/resolve/c0ffee/${big}`)).length === 2 ||
        second.lines.some((l) => l.includes("waiting for")),
      "the second process to fetch the file or wait",
    );
    release();
    expect([await first.proc.exited, await second.proc.exited]).toEqual([0, 0]);
    const outcome = (p: typeof first) => p.lines.filter((l) => l === "ok" || l.startsWith("error: "));
    const results = {
      first: outcome(first),
      second: outcome(second),
      sizes: tree(source).map((f) => [f, existsSync(join(target, f)) ? statSync(join(target, f)).size : -1]),
    };
    expect(results).toEqual({ first: ["ok"], second: ["ok"], sizes: tree(source).map((f) => [f, statSync(join(source, f)).size]) });
    expect(tree(target).sort()).toEqual([...tree(source), ".spool-complete"].sort()); // no .part or lock left
    for (const f of tree(source))
      expect({ f, same: readFileSync(join(target, f)).equals(readFileSync(join(source, f))) }).toEqual({ f, same: true });
    expect(hub.requests.filter((r) => r.startsWith("GET /owner/tiny/resolve/"))).toHaveLength(tree(source).length); // each file once
    expect(second.lines).toContain(`hub model owner/tiny: waiting for process ${first.proc.pid}, which is downloading it into ${target}`);
    hub.server.stop(true);
  }, 30_000);

  test("a lock left by a process that died is taken over, also when its pid now belongs to another process, or untouched for stallMs", async () => {
    hub = startHub("owner/tiny");
    const gone = Bun.spawn(["true"]);
    await gone.exited;
    const locks = {
      "dead pid": { pid: gone.pid, host: hostname(), token: "dead", ...here },
      // a restarted container's worker gets the same small pid: this process, started at another time
      "reused pid": { pid: process.pid, host: hostname(), token: "before-restart", started: "1", ...here },
      // left by a crash on another machine sharing the folder: judged by its age alone
      abandoned: { pid: 1, host: "elsewhere", token: "crashed" },
    };
    for (const [name, lock] of Object.entries(locks)) {
      const target = join(dir, "stale", name);
      mkdirSync(target, { recursive: true });
      writeFileSync(join(target, ".spool-download.lock"), JSON.stringify(lock));
      const hourAgo = new Date(Date.now() - 3600_000);
      if (name === "abandoned") utimesSync(join(target, ".spool-download.lock"), hourAgo, hourAgo);
      const out = sink();
      await downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out });
      expect({ name, files: tree(target).sort() }).toEqual({ name, files: [...tree(source), ".spool-complete"].sort() });
      expect(out.lines.filter((l) => l.includes("waiting for"))).toEqual([]);
    }
    hub.server.stop(true);
  });

  test("a waiter returns when the holder completes the model, and gives up with a clear error when the holder shows no progress", async () => {
    hub = startHub("owner/tiny");
    const env = { HF_ENDPOINT: hub.url };
    const lock = JSON.stringify({ pid: process.pid, host: hostname(), token: "live", ...here }); // a live holder: this very process
    const drive = async (clock: ManualClock, settled: () => boolean) => {
      while (!settled()) {
        await until(() => clock.sleeping > 0 || settled(), "the waiter to park or finish");
        clock.advance(LOCK_POLL_MS);
      }
    };

    const done = join(dir, "waited");
    mkdirSync(done, { recursive: true });
    writeFileSync(join(done, ".spool-download.lock"), lock);
    const clock = new ManualClock();
    const out = sink();
    let settled = false;
    const waiting = downloadFromHub("owner/tiny", done, { env, out, clock }).finally(() => (settled = true));
    await until(() => clock.sleeping > 0, "the waiter to park");
    writeFileSync(join(done, ".spool-complete"), "owner/tiny@c0ffee\n"); // the holder finishes
    rmSync(join(done, ".spool-download.lock"));
    await drive(clock, () => settled);
    expect(await waiting).toBe(done);
    expect(out.lines).toEqual([`hub model owner/tiny: waiting for process ${process.pid}, which is downloading it into ${done}\n`]);
    expect(hub.requests.filter((r) => r.startsWith("GET /owner/tiny/resolve/"))).toEqual([]);

    const stuck = join(dir, "stuck");
    mkdirSync(stuck, { recursive: true });
    writeFileSync(join(stuck, ".spool-download.lock"), lock);
    const clock2 = new ManualClock();
    let failed = false;
    const error = rejection(downloadFromHub("owner/tiny", stuck, { env, out: sink(), clock: clock2, stallMs: 60_000 })).finally(
      () => (failed = true),
    );
    await drive(clock2, () => failed);
    expect((await error).message).toBe(
      `hub model owner/tiny: process ${process.pid} on ${hostname()} holds ${join(stuck, ".spool-download.lock")} but has shown no progress for 60 s; stop it, or delete that file if no process is downloading, and start again`,
    );
    expect(readFileSync(join(stuck, ".spool-download.lock"), "utf8")).toBe(lock); // not taken from a live holder
    hub.server.stop(true);
  });

  test("a fresh lock of a process in another pid namespace is not taken over, though its pid means nothing here", async () => {
    hub = startHub("owner/tiny");
    const gone = Bun.spawn(["true"]);
    await gone.exited;
    // Another container on the same host name (host networking): its pid is not a process of ours.
    const lock = JSON.stringify({ pid: gone.pid, host: hostname(), token: "other-container", ns: "pid:[1]", boot: here.boot });
    const target = join(dir, "other-namespace");
    mkdirSync(target, { recursive: true });
    writeFileSync(join(target, ".spool-download.lock"), lock);
    const clock = new ManualClock();
    let failed = false;
    const error = rejection(
      downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out: sink(), clock, stallMs: 60_000 }),
    ).finally(() => (failed = true));
    while (!failed) {
      await until(() => clock.sleeping > 0 || failed, "the waiter to park or give up");
      clock.advance(LOCK_POLL_MS);
    }
    expect((await error).message).toContain("has shown no progress for 60 s");
    expect(readFileSync(join(target, ".spool-download.lock"), "utf8")).toBe(lock);
    expect(hub.requests.filter((r) => r.startsWith("GET /owner/tiny/resolve/"))).toEqual([]);
    hub.server.stop(true);
  });

  test("a listing with a name outside the model folder is refused before anything is fetched or written", async () => {
    for (const name of ["transformer/../../escaped.bin", "/tmp/absolute.bin", "text_encoder/./x", "vae_decoder//x"]) {
      hub = startHub("owner/tiny");
      hub.extra.push(name);
      const target = join(dir, "evil", "model");
      const error = await rejection(downloadFromHub("owner/tiny", target, { env: { HF_ENDPOINT: hub.url }, out: sink() }));
      expect(error.message).toBe(
        `hub model owner/tiny: the hub lists a file named ${JSON.stringify(name)}, which is not a relative path inside the model folder (absolute, or with "..", "." or empty parts); refusing to download from it (check HF_ENDPOINT)`,
      );
      expect(hub.requests.filter((r) => !r.startsWith("GET /api/models/"))).toEqual([]);
      expect(existsSync(join(dir, "evil"))).toBe(false);
      hub.server.stop(true);
    }
  });
});
