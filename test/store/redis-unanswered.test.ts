import { describe, expect, test } from "bun:test";
import { ReservedAdmission } from "../../runtime/server/store/redis/redis-admission.ts";
import { redisReservations } from "../../runtime/server/store/redis/redis-reservations.ts";
import { RedisScripts } from "../../runtime/server/store/redis/redis-scripts.ts";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { watchReplies } from "../../runtime/server/store/redis/redis-watchdog.ts";
import { StoreUnavailableError } from "../../runtime/server/store/store.ts";
import { isPaused, startOwnRedis } from "../helpers/redis-server.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { RETENTION } from "./store-suite.ts";

// A redis-server that stops answering (paused with SIGSTOP: the connection stays open, no reply
// comes) must not hold requests for ever. The reply timeout is shortened to one second here: long
// enough for a working Redis on a loaded machine, whose slow reply would otherwise trip it. Each
// answer is checked to have come while Redis was still paused: only the timeout could give it.
const REPLY_TIMEOUT_MS = 1_000;
const connect = (url: string) => RedisStore.connect(url, { retention: RETENTION }, "{unanswered}:", REPLY_TIMEOUT_MS);

describe("redis store, when Redis stops answering", () => {
  test("a call fails as StoreUnavailableError within the reply timeout, while Redis is still paused, and the store works again once Redis answers", async () => {
    await using redis = await startOwnRedis();
    const store = await connect(redis.url);
    try {
      expect(await store.get("ep", "nope", Date.now())).toBeNull();
      redis.proc.kill("SIGSTOP");
      const failed = await store.get("ep", "nope", Date.now()).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failed).toBeInstanceOf(StoreUnavailableError);
      expect((failed as Error).message).toBe(`Redis did not answer within ${REPLY_TIMEOUT_MS} ms`);
      expect(await isPaused(redis.proc)).toBe(true);
      redis.proc.kill("SIGCONT");
      expect(await store.get("ep", "nope", Date.now())).toBeNull();
    } finally {
      redis.proc.kill("SIGCONT");
      await store.close();
    }
  });

  test("paused past a reconnection attempt, the store fails calls as unavailable and works again once Redis answers", async () => {
    await using redis = await startOwnRedis();
    const store = await connect(redis.url);
    const attempt = () =>
      store.get("ep", "nope", Date.now()).then(
        () => "answered",
        (err: unknown) => (err instanceof StoreUnavailableError ? "unavailable" : String(err)),
      );
    try {
      redis.proc.kill("SIGSTOP");
      // The first call trips the watch; the next ones each wait for a connection attempt that
      // times out (also after the reply timeout) while Redis stays paused.
      expect([await attempt(), await attempt(), await attempt()]).toEqual(["unavailable", "unavailable", "unavailable"]);
      expect(await isPaused(redis.proc)).toBe(true);
      redis.proc.kill("SIGCONT");
      // A connect begun while paused may still end in its timeout: the store answers on a later call.
      await until(async () => (await attempt()) === "answered", "the store to answer again once Redis goes on");
    } finally {
      redis.proc.kill("SIGCONT");
      await store.close();
    }
  });

  test("closing the store while Redis does not answer ends, its slot's return failing after the reply timeout instead of waiting", async () => {
    await using redis = await startOwnRedis();
    const store = await connect(redis.url);
    const held = await store.admitRequest("ep:run", { requests: 100, concurrent: 2 }, 10_000, Date.now());
    expect(held.ok).toBe(true);
    redis.proc.kill("SIGSTOP");
    try {
      await store.close(); // gives back its slots: that call fails after the timeout instead of waiting
      expect(await isPaused(redis.proc)).toBe(true);
    } finally {
      redis.proc.kill("SIGCONT");
    }
  });

  test("a request to a server whose Redis stopped answering gets 503 with a JSON error and Retry-After; the log says so once", async () => {
    await using redis = await startOwnRedis();
    const warnings: string[] = [];
    const log = { info() {}, error() {}, warn: (msg: string) => void warnings.push(msg) };
    await using srv = await startTestServer({ store: await connect(redis.url), log });
    expect((await srv.json("GET", "/v2/echo/status/nope"))[0]).toBe(404);
    redis.proc.kill("SIGSTOP");
    try {
      const res = await srv.call("POST", "/v2/echo/run", { input: { n: 1 } });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as { error: string }).error).toStartWith(
        `store unavailable: Redis did not answer within ${REPLY_TIMEOUT_MS} ms`,
      );
      expect((await srv.call("GET", "/v2/echo/status/nope")).status).toBe(503);
      expect(warnings).toEqual(["store unavailable: requests answer 503"]);
      expect(await isPaused(redis.proc)).toBe(true);
    } finally {
      redis.proc.kill("SIGCONT");
    }
    // Once Redis answers again so does the server: the first request after it resumes may still
    // meet the store's reconnection (a 503 that made nothing), so it is asked until it answers.
    await until(
      async () => (await srv.json("POST", "/v2/echo/run", { input: { n: 1 } }))[0] === 200,
      "the server to accept again once Redis answers",
    );
  });
});

describe("redis admission, when Redis stops answering", () => {
  test("slots a reservation asked for while Redis was paused (granted after it went on, to no one) are given back, not held for ten minutes", async () => {
    await using redis = await startOwnRedis();
    const p = "{unsure}:";
    const a = await RedisStore.connect(redis.url, { retention: RETENTION }, p, REPLY_TIMEOUT_MS);
    const b = await RedisStore.connect(redis.url, { retention: RETENTION }, p, REPLY_TIMEOUT_MS);
    const limit = { requests: 1_000, concurrent: 1 };
    const now = Date.now();
    const check = new Bun.RedisClient(redis.url);
    // Scripts Redis has run (reservations are the only scripts here): the slot granted to nobody
    // may be given back before a read of the slots would see it, so the run is counted instead.
    const scriptsRun = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(String(await check.send("INFO", ["commandstats"])))?.[1] ?? 0);
    try {
      expect((await a.admitRequest("ep:other", limit, 10_000, now)).ok).toBe(true); // Redis has a's scripts from here on
      const before = await scriptsRun();
      redis.proc.kill("SIGSTOP");
      // a's reservation reaches the paused Redis; a gives up on it after the reply timeout.
      await expect(a.admitRequest("ep:run", limit, 10_000, now)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(await isPaused(redis.proc)).toBe(true);
      redis.proc.kill("SIGCONT");
      // Redis runs the reservation it had received, granting the one slot to a reservation nobody waits on.
      expect(await until(async () => (await scriptsRun()) - before, "Redis to run the reservation it received while paused")).toBe(1);
      // a gives it back on one of its next trims: b is admitted then.
      let i = 0;
      await until(
        async () => (await b.admitRequest("ep:run", limit, 10_000, now + 1 + i++)).ok,
        "b to be admitted to the slot a gave back",
      );
    } finally {
      redis.proc.kill("SIGCONT");
      await Promise.all([a.close(), b.close()]);
      check.close();
    }
  });
});

test("redis admission: slots a trim could not give back while Redis did not answer are given back once it does", async () => {
  await using redis = await startOwnRedis();
  const p = "{unsure-trim}:";
  const client = new Bun.RedisClient(redis.url, { connectionTimeout: REPLY_TIMEOUT_MS });
  await client.connect();
  const watch = watchReplies(client, { timeoutMs: REPLY_TIMEOUT_MS });
  const real = redisReservations(client, new RedisScripts(client, [p, RETENTION.syncMs, RETENTION.asyncMs]), p);
  // Counts the give-backs that failed: the event that shows a trim tried while Redis was paused.
  let failedGiveBacks = 0;
  const backend = {
    ...real,
    giveBack: (bucket: string, ids: string[]) =>
      real.giveBack(bucket, ids).catch((err: unknown) => Promise.reject((failedGiveBacks++, err))),
  };
  const other = new Bun.RedisClient(redis.url);
  const b = new ReservedAdmission(redisReservations(other, new RedisScripts(other, [p, RETENTION.syncMs, RETENTION.asyncMs]), p), 10);
  const a = new ReservedAdmission(backend, 10); // trims every 10 ms: a slot unused for 200 ms is surplus
  const limit = { requests: 1_000, concurrent: 1 };
  const now = Date.now();
  try {
    const held = await a.admit("ep:run", limit, 10_000, now);
    expect(held.ok).toBe(true);
    redis.proc.kill("SIGSTOP");
    await expect(client.send("PING", [])).rejects.toBeInstanceOf(StoreUnavailableError); // the watch drops the connection
    if (held.ok) await held.release();
    // a's trims find the slot surplus; giving it back fails (no connection, or no answer).
    await until(() => failedGiveBacks > 0, "a trim to fail to give the slot back while Redis is paused");
    expect(await isPaused(redis.proc)).toBe(true);
    redis.proc.kill("SIGCONT");
    let i = 0;
    await until(
      async () => (await b.admit("ep:run", limit, 10_000, now + 1 + i++)).ok,
      "b to be admitted to the slot a gives back once Redis answers",
    );
  } finally {
    redis.proc.kill("SIGCONT");
    await Promise.all([a.close(), b.close()]);
    watch.stop();
    client.close();
    other.close();
  }
});
