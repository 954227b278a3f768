import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { redisUrl } from "../helpers/redis-server.ts";
import { spawnProcess, type Spawned } from "../helpers/spawned.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";
import { until } from "../helpers/until.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");
const BUN = process.execPath;

/** Three real `spool serve` processes on one real Redis, each with its own data dir and port. */
let dir: string;
let store: string;
let key: string;
const servers: { proc: Spawned; url: string }[] = [];

const CONFIG = `
[server]
takeWaitMs = 30000
stopWaitMs = 30000
streamWaitMs = 30000
sweepIntervalMs = 100
workerLossTimeoutMs = 1500
rateWindowMs = 600000
webhookAllow = ["127.0.0.1"]
webhookSecret = "whsec_${Buffer.from("a shared secret for all servers").toString("base64")}"

[endpoints.echo]
workersMax = 0

[endpoints.limited]
rateLimits = { run = { requests = 3 } }
`;

async function startServer(i: number): Promise<{ proc: Spawned; url: string }> {
  const proc = spawnProcess([
    BUN,
    CLI,
    "serve",
    "--port",
    "0",
    "--data",
    join(dir, `data-${i}`),
    "--config",
    join(dir, "spool.toml"),
    "--store",
    store,
  ]);
  const [, url] = await proc.waitFor(/Spool listening on (\S+)/);
  return { proc, url: url! };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "spool-multi-"));
  store = `${await redisUrl()}?prefix=multi-${crypto.randomUUID().slice(0, 8)}`;
  await Bun.write(join(dir, "spool.toml"), CONFIG);
  const made = Bun.spawnSync([BUN, CLI, "keys", "create", "--name", "multi", "--store", store, "--data", join(dir, "keys")]);
  key = made.stdout.toString().trim().split("\n").at(-1)!;
  for (let i = 0; i < 3; i++) servers.push(await startServer(i));
}, 30_000);

afterAll(async () => {
  for (const s of servers) await s.proc[Symbol.asyncDispose]();
  rmSync(dir, { recursive: true, force: true });
});

const at = (i: number) => servers[i]!.url;
async function call(i: number, method: string, path: string, body?: unknown): Promise<[number, any]> {
  const res = await fetch(`${at(i)}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return [res.status, text ? JSON.parse(text) : undefined];
}
const worker = (i: number, id: string) => ({
  take: async () => {
    const res = await fetch(`${at(i)}/v2/echo/job-take/${id}?gpu=x&job_in_progress=0`, { headers: { authorization: key } });
    return res.status === 204 ? null : ((await res.json()) as any);
  },
  done: (jobId: string, body: unknown) =>
    fetch(`${at(i)}/v2/echo/job-done/${id}/${jobId}?gpu=x&isStream=false`, {
      method: "POST",
      headers: { authorization: key },
      body: JSON.stringify(body),
    }),
  stream: (jobId: string, output: unknown) =>
    fetch(`${at(i)}/v2/echo/job-stream/${id}/${jobId}?gpu=x&isStream=false`, {
      method: "POST",
      headers: { authorization: key },
      body: JSON.stringify({ output }),
    }),
  ping: (ids: string[]) => fetch(`${at(i)}/v2/echo/ping/${id}?job_id=${ids.join(",")}`, { headers: { authorization: key } }),
  stops: async () =>
    ((await (await fetch(`${at(i)}/v2/echo/job-stop/${id}?gpu=x`, { headers: { authorization: key } })).json()) as any)
      .jobsToStop as string[],
});

describe("several servers on one Redis", () => {
  test("any server answers for any job: submit on A, take on B, status and stream on C", async () => {
    const w = worker(1, "wb");
    const take = w.take(); // parked on B before the job exists: it wakes when A queues it
    const [, { id }] = await call(0, "POST", "/v2/echo/run", { input: { n: 1 } });
    expect((await take).id).toBe(id);
    expect((await call(2, "GET", `/v2/echo/status/${id}`))[1]).toMatchObject({ id, status: "IN_PROGRESS", workerId: "wb" });
    const streamOnC = call(2, "GET", `/v2/echo/stream/${id}`); // waits for the chunk B receives
    await w.stream(id, "chunk");
    expect((await streamOnC)[1]).toMatchObject({ status: "IN_PROGRESS", stream: [{ output: "chunk" }] });
    await w.done(id, { output: { n: 2 } });
    expect((await call(0, "GET", `/v2/echo/status/${id}`))[1]).toMatchObject({ status: "COMPLETED", output: { n: 2 } });
  });

  test("a runsync on A answers when B's worker finishes", async () => {
    const w = worker(1, "wb2");
    const run = call(0, "POST", "/v2/echo/runsync", { input: { n: 3 } });
    const job = await until(() => w.take(), "the job on B");
    await w.done(job.id, { output: "sync done" });
    expect((await run)[1]).toMatchObject({ status: "COMPLETED", output: "sync done" });
  });

  test("a cancel on A reaches the worker attached to B", async () => {
    const w = worker(1, "wc");
    const [, { id }] = await call(0, "POST", "/v2/echo/run", { input: {} });
    expect((await w.take()).id).toBe(id);
    const stops = w.stops(); // parked on B
    expect((await call(2, "POST", `/v2/echo/cancel/${id}`))[1]).toEqual({ id, status: "CANCELLED" });
    expect(await stops).toEqual([id]);
  });

  test("retry on C, purge on B and health on A see one state", async () => {
    const w = worker(0, "wr");
    const [, { id }] = await call(1, "POST", "/v2/echo/run", { input: { r: 1 } });
    await w.take();
    await w.done(id, { error: "boom" });
    expect((await call(2, "POST", `/v2/echo/retry/${id}`))[1]).toEqual({ id, status: "IN_QUEUE" });
    await call(2, "POST", "/v2/echo/run", { input: {} });
    const [, before] = await call(0, "GET", "/v2/echo/health");
    expect(before.jobs.inQueue).toBe(2);
    expect((await call(1, "POST", "/v2/echo/purge-queue"))[1]).toEqual({ removed: 2, status: "completed" });
    expect((await call(0, "GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
  });

  test("rate limits count across servers", async () => {
    expect((await call(0, "POST", "/v2/limited/run", { input: {} }))[0]).toBe(200);
    expect((await call(1, "POST", "/v2/limited/run", { input: {} }))[0]).toBe(200);
    expect((await call(2, "POST", "/v2/limited/run", { input: {} }))[0]).toBe(200);
    const [code, body] = await call(0, "POST", "/v2/limited/run", { input: {} });
    expect(code).toBe(429);
    expect(body.error).toContain("rate limit");
  });

  test("a webhook is delivered once, not once per server", async () => {
    await using receiver = startReceiver([200]);
    const w = worker(2, "ww");
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const [, { id }] = await call(i, "POST", "/v2/echo/run", { input: { i }, webhook: receiver.url });
      ids.push(id);
      expect((await w.take()).id).toBe(id);
      await w.done(id, { output: i });
    }
    // A fourth call, then the end: every call has arrived and none is owed any more (the store
    // has no delivery left, so no server can send one again). The calls go out concurrently,
    // so the last one may arrive before the others.
    const [, { id: last }] = await call(1, "POST", "/v2/echo/run", { input: {}, webhook: receiver.url });
    await w.take();
    await w.done(last, { output: "last" });
    const redis = new Bun.RedisClient(store.replace(/\?.*$/, ""));
    const owed = `{${new URL(store).searchParams.get("prefix")}}:dl`;
    try {
      const received = () => new Set(receiver.calls.map((c) => JSON.parse(c.body).id));
      await until(
        async () => [...ids, last].every((id) => received().has(id)) && Number(await redis.send("ZCARD", [owed])) === 0,
        "all 4 calls delivered and none owed",
      );
    } finally {
      redis.close();
    }
    expect(receiver.calls.map((c) => JSON.parse(c.body).id).sort()).toEqual([...ids, last].sort());
  });

  test("exactly one server at a time holds the duties lease and applies the worker-loss rule; when it dies another takes over, when every server dies a restarted one does, and no job is lost", async () => {
    const redis = new Bun.RedisClient(store.replace(/\?.*$/, ""));
    const prefix = `{${new URL(store).searchParams.get("prefix")}}:`;
    const leaseHolder = async () => (await redis.send("GET", [`${prefix}lease:duties`])) as string | null;
    // Each server says in its metrics whether it holds the lease: exactly one does.
    const holders = async () => {
      const held = await Promise.all(
        servers.map(async (s) =>
          /^spool_duties_lease_held 1$/m.test(
            await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text(),
          ),
        ),
      );
      return held.flatMap((h, i) => (h ? [i] : []));
    };
    // One read of every server's metrics, returned only when it shows exactly one holder (a
    // second read could show another state than the one checked).
    const oneHolder = async () => {
      const held = await holders();
      return held.length === 1 ? held : undefined;
    };
    const [first] = await until(oneHolder, "exactly one server holding the lease");
    let holder = await leaseHolder();
    expect(holder).not.toBeNull();
    // A worker takes a job on server C and goes silent: the lease holder re-queues the job.
    const [, { id }] = await call(0, "POST", "/v2/echo/run", { input: { lost: true } });
    expect((await worker(2, "silent").take()).id).toBe(id);
    await until(async () => (await call(1, "GET", `/v2/echo/status/${id}`))[1].status === "IN_QUEUE", "the worker-loss rule");

    // The holder dies: once its lease runs out, another of the two left takes it, and only one.
    const dead = servers.splice(first!, 1)[0]!;
    dead.proc.proc.kill(9);
    await dead.proc.proc.exited;
    await until(async () => (await leaseHolder()) !== holder, "the lease to pass from the dead holder");
    expect(await until(oneHolder, "exactly one of the servers left holding the lease")).toHaveLength(1);
    holder = await leaseHolder();

    // Kill every server with SIGKILL, restart them: the state is in Redis; a new holder appears.
    for (const s of servers) {
      s.proc.proc.kill(9);
      await s.proc.proc.exited;
    }
    servers.length = 0;
    for (let i = 0; i < 3; i++) servers.push(await startServer(10 + i));
    const next = await until(async () => {
      const h = (await redis.send("GET", [`${prefix}lease:duties`])) as string | null;
      return h && h !== holder && h;
    }, "a new lease holder");
    expect(next).not.toBe(holder);
    expect((await call(2, "GET", `/v2/echo/status/${id}`))[1]).toMatchObject({ id, status: "IN_QUEUE" });
    const w = worker(0, "after");
    expect((await w.take()).id).toBe(id);
    await w.done(id, { output: "survived" });
    expect((await call(1, "GET", `/v2/echo/status/${id}`))[1].output).toBe("survived");
    redis.close();
  }, 30_000);
});
