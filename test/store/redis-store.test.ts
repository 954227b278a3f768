import { describe, expect, test } from "bun:test";
import prelude from "../../runtime/server/store/redis/lua/prelude.lua" with { type: "text" };
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { topics } from "../../runtime/server/store/store-events.ts";
import type { NewJob } from "../../runtime/server/store/store.ts";
import { redisUrl, startOwnRedis } from "../helpers/redis-server.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";
import { runStoreLogsSuite } from "./store-logs-suite.ts";

/** The fields a result's script reads of a job (butInput in prelude.lua). */
const FIELDS_BUT_INPUT = [.../local butInput = \{([^}]*)\}/.exec(prelude)![1]!.matchAll(/'([^']+)'/g)].map((m) => m[1]!);

const prefix = () => `{t-${crypto.randomUUID().slice(0, 8)}}:`;
const connect = async (p = prefix()) => RedisStore.connect(await redisUrl(), { retention: RETENTION }, p);

// Each test gets its own key prefix on one real redis-server.
runStoreSuite("redis", () => connect());
runStoreLogsSuite("redis", () => connect());

const T0 = 1_790_000_000_000;
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const newJob = (id: string, over: Partial<NewJob> = {}): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false, ...over });

/** Script runs (EVALSHA calls) the redis-server at `url` has answered so far. */
async function evalshaCallsAt(url: string): Promise<number> {
  const raw = new Bun.RedisClient(url);
  try {
    const stats = String(await raw.send("INFO", ["commandstats"]));
    return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  } finally {
    raw.close();
  }
}

/** A store on a fresh key prefix and a plain client to look at its keys, both closed after `body`. */
async function withRaw(body: (s: RedisStore, raw: Bun.RedisClient, p: string) => Promise<void>): Promise<void> {
  const p = prefix();
  const s = await connect(p);
  const raw = new Bun.RedisClient(await redisUrl());
  try {
    await body(s, raw, p);
  } finally {
    raw.close();
    await s.close();
  }
}

test("redis: submissions made while one is in flight go to Redis together as one script run, and so do takes and results", async () => {
  // A redis-server of its own: its command counts are this store's alone.
  await using own = await startOwnRedis();
  const evalshaCalls = () => evalshaCallsAt(own.url);
  const s = await RedisStore.connect(own.url, { retention: RETENTION }, prefix());
  try {
    await s.enqueue(newJob("first"), T0); // the script is loaded
    const before = await evalshaCalls();
    const ids = Array.from({ length: 20 }, (_, i) => `j${i}`);
    const jobs = await Promise.all(ids.map((id) => s.enqueue(newJob(id), T0)));
    expect(await evalshaCalls()).toBe(before + 2); // the first at once, the 19 made meanwhile together
    expect(jobs.map((j) => [j.id, j.status])).toEqual(ids.map((id) => [id, "IN_QUEUE"]));
    const beforeTakes = await evalshaCalls();
    const taken = await Promise.all([s.claim("ep", "w", 1, T0), s.claim("ep", "w", 10, T0), s.claim("ep", "w", 20, T0)]);
    expect(await evalshaCalls()).toBe(beforeTakes + 2);
    expect(taken.flat().map((j) => j.id)).toEqual(["first", ...ids]);
    const beforeResults = await evalshaCalls();
    const done = await Promise.all(ids.map((id, i) => s.finish("w", id, { output: i }, false, T0 + 1)));
    expect(await evalshaCalls()).toBe(beforeResults + 2);
    expect(done.map((j) => [j?.id, j?.status, j?.output])).toEqual(ids.map((id, i) => [id, "COMPLETED", i]));
  } finally {
    await s.close();
  }
});

test("redis: a submission that fails in Redis fails alone, the others sent with it land", () =>
  withRaw(async (s, raw, p) => {
    await raw.send("SET", [`${p}list:broken`, "not a sorted set"]); // the broken endpoint's listing cannot be written
    const results = await Promise.allSettled([
      s.enqueue(newJob("a"), T0),
      s.enqueue(newJob("x", { endpointId: "broken" }), T0),
      s.enqueue(newJob("b"), T0),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toContain("WRONGTYPE");
    expect((await s.claim("ep", "w", 5, T0)).map((j) => j.id)).toEqual(["a", "b"]);
    // Alone it fails the same way.
    expect(String(await s.enqueue(newJob("y", { endpointId: "broken" }), T0).catch((e) => e))).toContain("WRONGTYPE");
  }));

test("redis: after Redis loses its scripts, submissions still run in the order they were made", () =>
  withRaw(async (s, raw) => {
    await raw.send("SCRIPT", ["FLUSH"]);
    // One submission a turn of the event loop: some go while the first to find its script
    // missing reloads them all, some are sent before that reply and find it missing too.
    const ids = Array.from({ length: 200 }, (_, i) => `j${i}`);
    const jobs: Promise<unknown>[] = [];
    for (const id of ids) {
      jobs.push(s.enqueue(newJob(id), T0));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(jobs);
    expect((await s.claim("ep", "w", 300, T0)).map((j) => j.id)).toEqual(ids);
  }));

describe("redis store, several servers on one prefix", () => {
  test("a batch claim on one server announces every job it took to the others", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    try {
      for (const id of ["j1", "j2", "j3"]) await a.enqueue(newJob(id), T0);
      const heard = new Set<string>();
      const offs = ["j1", "j2", "j3"].map((id) => b.events.on(topics.job(id), () => heard.add(id)));
      await b.get("ep", "j1", T0); // a waiter reads after it starts listening
      expect((await a.claim("ep", "w", 3, T0)).map((j) => j.id)).toEqual(["j1", "j2", "j3"]);
      for (let i = 0; i < 1_000 && heard.size < 3; i++) await Bun.sleep(1);
      expect([...heard].sort()).toEqual(["j1", "j2", "j3"]);
      offs.forEach((off) => off());
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("a job's changes are announced only while some server listens to it", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    const raw = new Bun.RedisClient(await redisUrl());
    const heard: string[] = [];
    const marker = Promise.withResolvers<void>();
    await raw.subscribe(`${p}events`, (message: string) => {
      heard.push(message);
      if (message === topics.queue("marker")) marker.resolve();
    });
    try {
      for (const id of ["quiet", "watched"]) await a.enqueue(newJob(id), T0);
      const off = b.events.on(topics.job("watched"), () => {});
      await b.get("ep", "watched", T0);
      await a.claim("ep", "w", 2, T0);
      await a.finish("w", "quiet", { output: 1 }, false, T0);
      await a.finish("w", "watched", { output: 1 }, false, T0);
      off();
      await a.enqueue(newJob("m", { endpointId: "marker" }), T0); // one channel keeps its order
      await marker.promise;
      const jobTopics = heard.flatMap((m) => (m.startsWith("[") ? (JSON.parse(m) as string[]) : [m])).filter((t) => t.startsWith("job:"));
      expect(jobTopics).toEqual([topics.job("watched"), topics.job("watched")]);
    } finally {
      raw.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
});

test("redis: an output that is the job's stream is kept once, in the job, and read from there in pieces", () =>
  withRaw(async (s, raw, p) => {
    const big = "y".repeat(2_500_000); // over 1 MB: three pieces
    await s.enqueue(newJob("big"), T0);
    await s.claim("ep", "w", 1, T0);
    await s.finish("w", "big", { output: big }, true, T0 + 1);
    expect(await raw.send("EXISTS", [`${p}ch:big`])).toBe(0);
    // What Redis holds for the job: its hash and any chunk list, together under 1.5 times the output.
    const held = async (key: string) => Number((await raw.send("MEMORY", ["USAGE", `${p}${key}`, "SAMPLES", "0"])) ?? 0);
    expect((await held("job:big")) + (await held("ch:big"))).toBeLessThan(1.5 * big.length);
    const pieces = (await s.readChunks("ep", "big", 0, T0 + 1))!.chunks as string[];
    expect(pieces.length).toBe(3);
    expect(pieces.join("")).toBe(big);
    expect((await s.readStream("ep", "big", T0 + 1))!.chunks).toEqual(pieces);
    expect((await s.readStream("ep", "big", T0 + 1))!.chunks).toEqual([]);
    // A job that streamed keeps its chunks; its output is not added to them.
    await s.enqueue(newJob("streamed"), T0);
    await s.claim("ep", "w", 1, T0);
    await s.appendChunks("w", "streamed", ["a"], T0);
    await s.finish("w", "streamed", { output: ["a"] }, true, T0 + 1);
    expect(await raw.send("LRANGE", [`${p}ch:streamed`, "0", "-1"])).toEqual(['"a"']);
    expect((await s.readChunks("ep", "streamed", 0, T0 + 1))!.chunks).toEqual(["a"]);
  }));

test("redis: webhook calls recorded by earlier versions are still delivered with their job's status and output", () =>
  withRaw(async (s, raw, p) => {
    // As the store two versions before wrote it: the job's whole hash as one JSON text.
    const job = {
      id: "old",
      ep: "ep",
      status: "COMPLETED",
      input: '{"id":"old"}',
      output: '{"done":true}',
      policy: JSON.stringify(policy),
      timeout: "60000",
      ttl: "86400000",
      low: "0",
      sync: "0",
      created: String(T0),
      queued: String(T0),
      expires: String(T0 + 60_000),
      losses: "0",
      retries: "0",
    };
    await raw.send("HSET", [`${p}dl:old:1`, "url", "http://x/h", "job", JSON.stringify(job), "attempts", "2"]);
    // As the version before wrote it: the input and the output beside the other fields.
    const { input, output, ...fields } = { ...job, id: "apart" };
    await raw.send("HSET", [
      `${p}dl:apart:2`,
      "url",
      "http://x/h",
      "job",
      JSON.stringify(fields),
      "attempts",
      "0",
      "input",
      input,
      "output",
      output,
    ]);
    await raw.send("ZADD", [`${p}dl`, String(T0), "old:1", String(T0 + 1), "apart:2"]);
    const [d, e] = await s.takeDueDeliveries(T0 + 1, 1_000, 10);
    expect(d).toMatchObject({
      id: "old:1",
      url: "http://x/h",
      attempts: 2,
      job: { id: "old", status: "COMPLETED", output: { done: true } },
    });
    expect(e).toMatchObject({ id: "apart:2", attempts: 0, job: { id: "apart", status: "COMPLETED", output: { done: true } } });
    expect(e && "input" in e.job).toBe(false);
  }));

test("redis: a webhook call owed for a job keeps no copy of its input, and its result's answer does not carry it", () =>
  withRaw(async (s, raw, p) => {
    const input = { prompt: "i".repeat(1_000_000) };
    await s.enqueue(newJob("hooked", { input, webhook: "http://x/h" }), T0);
    await s.claim("ep", "w", 1, T0);
    const done = await s.finish("w", "hooked", { output: { ok: true } }, false, T0 + 1);
    expect(done && "input" in done).toBe(false);
    const [id] = (await raw.send("ZRANGE", [`${p}dl`, "0", "-1"])) as string[];
    const held = Number(await raw.send("MEMORY", ["USAGE", `${p}dl:${id}`, "SAMPLES", "0"]));
    expect(held).toBeLessThan(10_000); // the job's other fields and its output; the input is 1 MB
    expect((await s.get("ep", "hooked", T0 + 1))?.input).toEqual(input); // the job itself keeps it
  }));

test("redis: a result reads every field a job's hash can have but its input (the list the result's script reads)", () =>
  withRaw(async (s, raw, p) => {
    const s3Config = { accessId: "a", accessSecret: "s", bucketName: "b", endpointUrl: "http://s3" };
    const rich = {
      webhook: "http://x/h",
      s3Config,
      keyId: "k1",
      origin: "http://10.0.0.5:8080",
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      sync: true,
      policy: { ...policy, lowPriority: true },
    };
    // One job that streamed and was read, retried after failing; one whose output is its stream.
    await s.enqueue(newJob("streamed", rich), T0);
    await s.enqueue(newJob("whole", { ...rich, idempotency: { key: "k", bodyHash: "h", ttlMs: 60_000 } }), T0);
    await s.claim("ep", "w", 2, T0);
    await s.progress("w", "streamed", { step: 1 }, T0);
    await s.appendChunks("w", "streamed", ["a"], T0);
    await s.readStream("ep", "streamed", T0);
    await s.finish("w", "streamed", { error: "boom" }, false, T0 + 1);
    await s.retry("ep", "streamed", T0 + 2);
    await s.claim("ep", "w", 1, T0 + 3);
    await s.progress("w", "streamed", { step: 2 }, T0 + 3);
    await s.finish("w", "whole", { output: "all" }, true, T0 + 4);
    const fields = new Set<string>();
    for (const id of ["streamed", "whole"]) for (const f of (await raw.send("HKEYS", [`${p}job:${id}`])) as string[]) fields.add(f);
    fields.delete("input");
    expect([...fields].filter((f) => !FIELDS_BUT_INPUT.includes(f))).toEqual([]);
    expect(fields.size).toBeGreaterThanOrEqual(FIELDS_BUT_INPUT.length - 1); // the test writes (nearly) all of them
    // What the result gave back is the job as stored, less its input.
    const done = await s.finish("w", "streamed", { output: 1 }, false, T0 + 5);
    const { input: _input, ...stored } = (await s.get("ep", "streamed", T0 + 5))!;
    expect(done).toEqual(stored);
  }));

test("redis: Idempotency-Keys past their ttl are removed by the sweep, whatever became of their jobs", () =>
  withRaw(async (s, raw, p) => {
    const keyed = (id: string, key: string, ttlMs: number) => newJob(id, { keyId: "k", idempotency: { key, bodyHash: "h", ttlMs } });
    await s.enqueue(keyed("a", "short", 1_000), T0);
    await s.enqueue(keyed("b", "long", 5_000), T0);
    const kept = async () => {
      const keys = [];
      for (const key of ["long", "short"]) if (Number(await raw.send("EXISTS", [`${p}idem:k:ep:${key}`])) === 1) keys.push(key);
      return [keys, Number(await raw.send("ZCARD", [`${p}idemexp`]))];
    };
    await s.sweep(T0 + 999, 60_000);
    expect(await kept()).toEqual([["long", "short"], 2]);
    await s.sweep(T0 + 1_000, 60_000);
    expect(await kept()).toEqual([["long"], 1]);
    await s.sweep(T0 + 5_000, 60_000);
    expect(await kept()).toEqual([[], 0]);
    expect((await s.health("ep", T0 + 5_000, 60_000)).jobs.inQueue).toBe(2); // the jobs themselves live on
  }));

test("redis: two servers on one Redis, each sent the same key at once, make one job", () =>
  withRaw(async (s, _raw, p) => {
    const other = await connect(p);
    try {
      const tag = { key: "together", bodyHash: "h", ttlMs: 60_000 };
      const sent = await Promise.all(
        [s, other, s, other].map((store, i) => store.enqueue(newJob(`c${i}`, { keyId: "k", idempotency: tag }), T0, 100)),
      );
      expect(new Set(sent.map((j) => j.id)).size).toBe(1);
      expect(sent.filter((j) => !j.replayed).length).toBe(1);
      expect((await s.health("ep", T0, 60_000)).jobs.inQueue).toBe(1);
    } finally {
      await other.close();
    }
  }));

test("redis: a key written before keys had an expiry (named by its job) is kept as long as its job, then is free", () =>
  withRaw(async (s, raw, p) => {
    const keyed = (id: string) =>
      newJob(id, { keyId: "k", policy: { ...policy, ttl: 10_000 }, idempotency: { key: "order-1", bodyHash: "h", ttlMs: 86_400_000 } });
    await s.enqueue(keyed("a"), T0);
    // As the earlier form wrote it: {job, ih}, its name in the job's hash, removed with the job.
    const ik = `${p}idem:k:ep:order-1`;
    await raw.send("HDEL", [ik, "exp"]);
    await raw.send("ZREM", [`${p}idemexp`, ik]);
    await raw.send("HSET", [`${p}job:a`, "idem", ik]);
    expect(await s.findByIdempotencyKey("k", "ep", "order-1", T0)).toMatchObject({ jobId: "a", expiresAt: T0 + 10_000 });
    expect((await s.enqueue(keyed("b"), T0 + 9_999)).id).toBe("a");
    await s.sweep(T0 + 10_000, 60_000);
    expect(Number(await raw.send("EXISTS", [ik]))).toBe(0);
    expect((await s.enqueue(keyed("c"), T0 + 10_000)).id).toBe("c");
  }));

/** Commands the redis-server has run so far (scripts' own calls included), by name. */
async function commandCalls(url: string, names: string[]): Promise<Record<string, number>> {
  const raw = new Bun.RedisClient(url);
  try {
    const stats = String(await raw.send("INFO", ["commandstats"]));
    return Object.fromEntries(names.map((c) => [c, Number(new RegExp(`cmdstat_${c}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)]));
  } finally {
    raw.close();
  }
}

test("redis: a /requests page reads about as many jobs as it returns, with or without a status, however many are retained", async () => {
  // A redis-server of its own: the counts are not shared with other test files.
  await using redis = await startOwnRedis();
  const s = await RedisStore.connect(redis.url, { retention: RETENTION }, prefix());
  try {
    const ids = Array.from({ length: 300 }, (_, i) => `j${i}`);
    for (const id of ids) await s.enqueue(newJob(id), T0);
    await s.claim("ep", "w", 300, T0);
    await s.finish("w", "j0", { error: "boom" }, false, T0 + 1); // the oldest job is the one FAILED
    for (const id of ids.slice(1, 280)) await s.finish("w", id, { output: 1 }, false, T0 + 1);
    // 280..299 run on, and one is queued again
    for (const id of ["q"]) await s.enqueue(newJob(id), T0 + 2);
    const reads: Record<string, number> = {};
    for (const status of [undefined, "FAILED", "COMPLETED", "IN_PROGRESS", "IN_QUEUE"] as const) {
      const before = await commandCalls(redis.url, ["hgetall"]);
      const page = await s.recent("ep", T0 + 3, 10, undefined, status);
      const after = await commandCalls(redis.url, ["hgetall"]);
      reads[status ?? "any"] = after.hgetall! - before.hgetall!;
      expect(page.jobs.length).toBe(status === "FAILED" || status === "IN_QUEUE" ? 1 : 10);
    }
    // limit + 1 jobs read (the one past the page says whether there is a next), the 20 running
    // ones' ids looked at without reading them.
    expect(reads).toEqual({ any: 11, FAILED: 1, COMPLETED: 11, IN_PROGRESS: 11, IN_QUEUE: 1 });
  } finally {
    await s.close();
  }
});
