import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { until } from "../helpers/until.ts";

// kill -9 durability with real processes: `spool serve` is started from the CLI, work is done
// through HTTP only, the process is killed with SIGKILL and started again on the same data
// directory, and everything it answered for must still be there, exactly.

const ROOT = join(import.meta.dir, "..", "..");
const SPAWN_TIMEOUT = 30_000;

/** A `bun runtime/cli.ts serve --port 0 --data DIR` process, parsed from its stdout. */
interface Spool extends AsyncDisposable {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  port: number;
  /** The key printed on first start; undefined when the data dir already had keys. */
  createdKey: string | undefined;
  stdout: () => string;
  stderr: () => string;
}

async function drain(stream: ReadableStream<Uint8Array>, sink: { text: string }, until?: RegExp): Promise<boolean> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return false;
      sink.text += decoder.decode(value, { stream: true });
      if (until?.test(sink.text)) return true;
    }
  } finally {
    reader.releaseLock();
  }
}

/** `configToml`: by default one endpoint with no handler, so this test is its only worker. */
async function startSpool(dataDir: string, configToml = "[endpoints.echo]\n"): Promise<Spool> {
  const config = join(dataDir, "endpoints.toml");
  // The test's webhooks go to loopback.
  await Bun.write(
    config,
    configToml.startsWith("[server]\n")
      ? configToml.replace("[server]\n", '[server]\nwebhookAllow = ["127.0.0.1"]\n')
      : `[server]\nwebhookAllow = ["127.0.0.1"]\n${configToml}`,
  );
  const proc = Bun.spawn([process.execPath, "runtime/cli.ts", "serve", "--port", "0", "--data", dataDir, "--config", config], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = { text: "" };
  const err = { text: "" };
  // stderr carries the JSON log; keep reading it so the pipe never fills.
  void drain(proc.stderr, err);
  const dispose = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(9);
    await proc.exited;
  };
  try {
    const listening = /Spool listening on (http:\/\/127\.0\.0\.1:(\d+))/;
    if (!(await drain(proc.stdout, out, listening))) {
      await proc.exited;
      throw new Error(
        `spool serve exited (${proc.exitCode ?? proc.signalCode}) before listening\nstdout:\n${out.text}\nstderr:\n${err.text}`,
      );
    }
    void drain(proc.stdout, out);
    const [, url, port] = out.text.match(listening)!;
    // The key is on its own indented line after the announcement.
    const created = out.text.match(/created one named "default"[^\n]*\n\s*\n?\s+(\S+)\s*\n/);
    return {
      proc,
      url: url!,
      port: Number(port),
      createdKey: created?.[1],
      stdout: () => out.text,
      stderr: () => err.text,
      [Symbol.asyncDispose]: dispose,
    };
  } catch (e) {
    await dispose();
    throw e;
  }
}

/** A temporary data directory, removed on dispose. */
function tempDir(): { path: string } & Disposable {
  const path = mkdtempSync(join(tmpdir(), "spool-durability-"));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

/** HTTP against one running server with a key: the client API and the worker protocol. */
function client(base: () => string, key: string) {
  async function json(method: string, path: string, body?: unknown, init?: { form?: boolean }): Promise<[number, any]> {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: {
        authorization: init?.form ? key : `Bearer ${key}`,
        ...(init?.form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return [res.status, text ? JSON.parse(text) : undefined];
  }
  const ok = async (method: string, path: string, body?: unknown, init?: { form?: boolean }) => {
    const [code, data] = await json(method, path, body, init);
    if (code !== 200) throw new Error(`${method} ${path} answered ${code}: ${JSON.stringify(data)}`);
    return data;
  };
  const worker = (id: string) => ({
    // Only called while the queue holds a job, or with a job about to arrive: the CLI server
    // holds an empty take open for 20 s.
    take: () => ok("GET", `/v2/echo/job-take/${id}?gpu=test&job_in_progress=0`, undefined, { form: true }),
    done: (jobId: string, body: unknown) => ok("POST", `/v2/echo/job-done/${id}/${jobId}?gpu=test&isStream=false`, body, { form: true }),
    stream: (jobId: string, output: unknown) =>
      ok("POST", `/v2/echo/job-stream/${id}/${jobId}?gpu=test&isStream=false`, { output }, { form: true }),
  });
  return { json, ok, worker };
}

describe("kill -9 durability", () => {
  test(
    "`spool serve --port 0` listens on a real port and prints a key once",
    async () => {
      using dir = tempDir();
      let key: string;
      {
        await using first = await startSpool(dir.path);
        expect(first.port).toBeGreaterThan(0);
        expect(first.url).toBe(`http://127.0.0.1:${first.port}`);
        expect(first.createdKey).toMatch(/^\S{16,}$/);
        key = first.createdKey!;
        const api = client(() => first.url, key);
        expect(await api.json("GET", "/v2/echo/health")).toEqual([
          200,
          {
            jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 },
            workers: { idle: 0, running: 0, initializing: 0, unhealthy: 0 },
          },
        ]);
        first.proc.kill(9);
        await first.proc.exited;
      }
      await using second = await startSpool(dir.path);
      expect(second.createdKey).toBeUndefined();
      expect(second.stdout()).not.toContain("created one");
      // The key printed by the first start is the one that still works.
      expect((await client(() => second.url, key).json("GET", "/v2/echo/health"))[0]).toBe(200);
      expect((await client(() => second.url, "spool_not_a_key").json("GET", "/v2/echo/health"))[0]).toBe(401);
    },
    SPAWN_TIMEOUT,
  );

  test(
    "every job, its output, progress, stream chunks and queue order survive SIGKILL",
    async () => {
      using dir = tempDir();
      const first = await startSpool(dir.path);
      let current: Spool = first;
      // Whichever process is current is killed and awaited at the end, whatever happens.
      await using _cleanup = { [Symbol.asyncDispose]: () => current[Symbol.asyncDispose]() };
      const key = first.createdKey!;
      expect(key).toBeDefined();
      const api = client(() => current.url, key);
      const w1 = api.worker("w1");
      const w2 = api.worker("w2");

      // A synchronous job completed while its runsync waits: the take is parked until it arrives.
      const runsync = api.json("POST", "/v2/echo/runsync?wait=300000", { input: { n: 21 } });
      const syncJob = await w1.take();
      expect(syncJob.id).toMatch(/^sync-/);
      await w1.done(syncJob.id, { output: { n: 42 } });
      expect(await runsync).toEqual([
        200,
        {
          id: syncJob.id,
          status: "COMPLETED",
          output: { n: 42 },
          delayTime: expect.any(Number),
          executionTime: expect.any(Number),
          workerId: "w1",
        },
      ]);

      const s3Config = { accessId: "AK", accessSecret: "secret", bucketName: "b", endpointUrl: "http://127.0.0.1:9/" };
      const bodies = {
        completed: { input: { i: 1 } },
        running: { input: { i: 2 } },
        failed: { input: { i: 3 } },
        retried: { input: { i: 4 } },
        cancelled: { input: { i: 5 } },
        queuedA: {
          input: { i: 6, nested: { list: [1, "two", null], unicode: "中💩" } },
          webhook: "http://127.0.0.1:9/hook",
          policy: { executionTimeout: 60_000, lowPriority: true, ttl: 3_600_000 },
          s3Config,
        },
        queuedB: { input: { i: 7 } },
      };
      const ids: Record<keyof typeof bodies, string> = {} as never;
      for (const [name, body] of Object.entries(bodies) as [keyof typeof bodies, unknown][]) {
        const queued = await api.ok("POST", "/v2/echo/run", body);
        expect(queued).toEqual({ id: expect.any(String), status: "IN_QUEUE" });
        ids[name] = queued.id;
      }

      expect((await w1.take()).id).toBe(ids.completed);
      await w1.done(ids.completed, { output: { doubled: 2 } });
      expect((await w1.take()).id).toBe(ids.running);
      await w1.done(ids.running, { status: "IN_PROGRESS", output: { step: 1 } });
      await w1.stream(ids.running, { partial: "a" });
      expect((await w2.take()).id).toBe(ids.failed);
      await w2.done(ids.failed, { error: "boom" });
      // Failed and retried before the kill: queued again, behind queuedA and queuedB.
      expect((await w2.take()).id).toBe(ids.retried);
      await w2.done(ids.retried, { error: "first try" });
      expect(await api.ok("POST", `/v2/echo/retry/${ids.retried}`)).toEqual({ id: ids.retried, status: "IN_QUEUE" });
      expect(await api.ok("POST", `/v2/echo/cancel/${ids.cancelled}`)).toEqual({ id: ids.cancelled, status: "CANCELLED" });
      const all = [syncJob.id, ...Object.values(ids)];

      // Snapshot everything observable before the kill.
      const snapshot = async () => {
        const statuses: Record<string, unknown> = {};
        for (const id of all) statuses[id] = await api.json("GET", `/v2/echo/status/${id}`);
        return {
          statuses,
          health: await api.json("GET", "/v2/echo/health"),
          requests: await api.json("GET", "/v2/echo/requests?limit=100"),
        };
      };
      const before = await snapshot();
      expect(before.statuses).toEqual({
        [syncJob.id]: [
          200,
          {
            id: syncJob.id,
            status: "COMPLETED",
            output: { n: 42 },
            delayTime: expect.any(Number),
            executionTime: expect.any(Number),
            workerId: "w1",
          },
        ],
        [ids.completed]: [
          200,
          {
            id: ids.completed,
            status: "COMPLETED",
            output: { doubled: 2 },
            delayTime: expect.any(Number),
            executionTime: expect.any(Number),
            workerId: "w1",
          },
        ],
        [ids.running]: [
          200,
          { id: ids.running, status: "IN_PROGRESS", output: { step: 1 }, delayTime: expect.any(Number), workerId: "w1" },
        ],
        [ids.failed]: [
          200,
          {
            id: ids.failed,
            status: "FAILED",
            error: "boom",
            delayTime: expect.any(Number),
            executionTime: expect.any(Number),
            workerId: "w2",
          },
        ],
        [ids.retried]: [200, { id: ids.retried, status: "IN_QUEUE", queuePosition: 2 }],
        [ids.cancelled]: [200, { id: ids.cancelled, status: "CANCELLED" }],
        [ids.queuedA]: [200, { id: ids.queuedA, status: "IN_QUEUE", queuePosition: 0 }],
        [ids.queuedB]: [200, { id: ids.queuedB, status: "IN_QUEUE", queuePosition: 1 }],
      });
      expect(before.health).toEqual([
        200,
        {
          jobs: { completed: 2, failed: 1, inProgress: 1, inQueue: 3, retried: 1 },
          workers: { idle: 1, running: 1, initializing: 0, unhealthy: 0 },
        },
      ]);
      expect(before.requests[1].requests.map((r: { id: string }) => r.id)).toEqual([...all].reverse());

      first.proc.kill(9);
      expect(await first.proc.exited).not.toBe(0);
      expect(first.proc.signalCode).toBe("SIGKILL");

      current = await startSpool(dir.path);
      expect(current.createdKey).toBeUndefined();
      expect(current.stdout()).not.toContain("created one");

      expect(await snapshot()).toEqual(before);
      // The chunk streamed before the kill is still there to be read.
      expect(await api.json("GET", `/v2/echo/stream/${ids.running}`)).toEqual([
        200,
        { id: ids.running, status: "IN_PROGRESS", stream: [{ output: { partial: "a" } }] },
      ]);

      // The FAILED job can still be retried, and goes behind the jobs that were queued before.
      expect(await api.ok("POST", `/v2/echo/retry/${ids.failed}`)).toEqual({ id: ids.failed, status: "IN_QUEUE" });
      // A job submitted after the restart goes behind all of them (the queue order survived).
      const late = (await api.ok("POST", "/v2/echo/run", { input: { late: true } })).id as string;

      const w3 = api.worker("w3");
      const a = await w3.take();
      expect(a).toEqual({
        id: ids.queuedA,
        input: bodies.queuedA.input,
        webhook: bodies.queuedA.webhook,
        s3Config,
        policy: bodies.queuedA.policy,
        deadline: expect.any(Number),
      });
      const order = [a.id];
      for (let i = 0; i < 4; i++) order.push((await w3.take()).id);
      expect(order).toEqual([ids.queuedA, ids.queuedB, ids.retried, ids.failed, late]);

      // The worker that held the running job before the kill can still finish it.
      await w1.done(ids.running, { output: { final: true } });
      expect(await api.json("GET", `/v2/echo/status/${ids.running}`)).toEqual([
        200,
        {
          id: ids.running,
          status: "COMPLETED",
          output: { final: true },
          delayTime: expect.any(Number),
          executionTime: expect.any(Number),
          workerId: "w1",
        },
      ]);
      expect(await api.json("GET", "/v2/echo/health")).toEqual([
        200,
        {
          jobs: { completed: 3, failed: 0, inProgress: 5, inQueue: 0, retried: 2 },
          workers: { idle: 2, running: 1, initializing: 0, unhealthy: 0 },
        },
      ]);
    },
    SPAWN_TIMEOUT,
  );

  test(
    "rate limits of the embedded store survive SIGKILL within their window",
    async () => {
      using dir = tempDir();
      // A window of ten years: the test never crosses a window boundary.
      const toml =
        "[server]\nrateWindowMs = 315360000000\n[endpoints.echo.rateLimits.run]\nrequests = 5\n[endpoints.other.rateLimits.run]\nrequests = 5\n";
      const first = await startSpool(dir.path, toml);
      let current: Spool = first;
      await using _cleanup = { [Symbol.asyncDispose]: () => current[Symbol.asyncDispose]() };
      const api = client(() => current.url, first.createdKey!);
      for (let i = 0; i < 5; i++) expect((await api.json("POST", "/v2/echo/run", { input: { i } }))[0]).toBe(200);
      expect((await api.json("POST", "/v2/echo/run", { input: {} }))[0]).toBe(429);

      // Counts are written at most every ~100 ms (never on the request path): wait until they are.
      const db = new Database(join(dir.path, "spool.db"), { readonly: true });
      const persisted = () => db.query<{ count: number }, []>("SELECT count FROM rate_windows WHERE bucket = 'echo:run'").get()?.count;
      await until(() => persisted() === 5, "the rate-limit count of 5 to be persisted");
      db.close();

      first.proc.kill(9);
      await first.proc.exited;
      current = await startSpool(dir.path, toml);
      const [code, body] = await api.json("POST", "/v2/echo/run", { input: {} });
      expect({ code, body }).toEqual({ code: 429, body: { error: "rate limit: at most 5 run requests per 315360000 s on this endpoint" } });
      // The refused calls queued nothing: the five jobs are all there is.
      expect((await api.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(5);

      // A clean stop writes the counts too, and another endpoint's window was never touched.
      current.proc.kill("SIGTERM");
      await current.proc.exited;
      current = await startSpool(dir.path, toml);
      expect((await api.json("POST", "/v2/echo/run", { input: {} }))[0]).toBe(429);
      // The other endpoint has its whole window of 5, then its own 429.
      for (let i = 0; i < 5; i++) expect((await api.json("POST", "/v2/other/run", { input: { i } }))[0]).toBe(200);
      expect((await api.json("POST", "/v2/other/run", { input: {} }))[0]).toBe(429);
    },
    SPAWN_TIMEOUT,
  );
});
