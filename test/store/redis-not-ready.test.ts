import { expect, test } from "bun:test";
import { createServer } from "node:net";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { notReady } from "../../runtime/server/store/redis/redis-watchdog.ts";
import { startOwnRedis } from "../helpers/redis-server.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { RETENTION } from "./store-suite.ts";

const connect = (url: string) => RedisStore.connect(url, { retention: RETENTION }, "{notready}:", 2_000);

/** A port nothing listens on (taken, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

test("on a read-only replica (a failover pointed the store at one) a submission is a 503 with Retry-After naming it, not a 500", async () => {
  await using redis = await startOwnRedis();
  await using server = await startTestServer({ store: await connect(redis.url) });
  // What a failover does to the old primary: it becomes a replica (here of a primary that is down).
  const admin = new Bun.RedisClient(redis.url);
  await admin.send("REPLICAOF", ["127.0.0.1", String(await closedPort())]);
  admin.close();
  const res = await server.call("POST", "/v2/echo/run", { input: { n: 1 } });
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe("1");
  expect(await res.json()).toEqual({ error: "store unavailable: Redis is a read-only replica (after a failover?); retry later" });
});

const LOADING = "store unavailable: Redis is loading its data after a restart; retry later";

test("while redis-server restarts and loads its append-only file under load, requests answer 503 with Retry-After naming why, never 500, and 200 again after", async () => {
  // key-load-delay slows loading per key, so the load is long enough to be met by requests. Redis
  // answers anyone (LOADING) during a load only each time it has read this many bytes: every 2 MB
  // by default, more than these keys take, so requests would mostly wait unanswered until the end.
  await using redis = await startOwnRedis({
    aof: true,
    args: ["--key-load-delay", "20", "--loading-process-events-interval-bytes", "1024"],
  });
  const filler = new Bun.RedisClient(redis.url);
  for (let batch = 0; batch < 20; batch++) {
    await filler.send("MSET", Array.from({ length: 1_000 }, (_, i) => [`fill:${batch}:${i}`, "x"]).flat());
  }
  // Rewritten into an RDB preamble, which is what key-load-delay slows down.
  await filler.send("BGREWRITEAOF", []);
  while (/aof_rewrite_in_progress:1|aof_rewrite_scheduled:1/.test(String(await filler.send("INFO", ["persistence"])))) await Bun.sleep(10);
  filler.close();
  await using server = await startTestServer({ store: await connect(redis.url) });
  const answers: { status: number; retryAfter: string | null; error?: string }[] = [];
  let stop = false;
  const client = async () => {
    while (!stop) {
      const res = await server.call("POST", "/v2/echo/run", { input: {} });
      const body = (await res.json()) as { error?: string };
      answers.push({ status: res.status, retryAfter: res.headers.get("retry-after"), error: body.error });
    }
  };
  const load = Promise.all([client(), client(), client(), client()]);
  load.catch(() => {}); // a client's error is thrown where load is awaited, after Redis is stopped
  try {
    await until(() => answers.some((a) => a.status === 200), "a submission accepted before the restart");
    // The case this test is for: a request that meets Redis loading. Restarted again until one
    // does (how long a load lasts is up to the machine), and a failure if none ever does.
    for (let restarts = 0; !answers.some((a) => a.error === LOADING); restarts++) {
      if (restarts === 5) throw new Error(`no request met Redis loading its data in ${restarts} restarts`);
      await redis.restart();
    }
    const sinceLoaded = answers.length;
    await until(() => answers.slice(sinceLoaded).filter((a) => a.status === 200).length >= 20, "20 submissions accepted after the load");
  } finally {
    stop = true;
    await load;
  }
  const failed = answers.filter((a) => a.status !== 200);
  for (const a of failed) {
    expect(a.status).toBe(503);
    expect(a.retryAfter).toBe("1");
    expect(a.error).toMatch(
      /^store unavailable: (Redis is loading its data after a restart|Redis refuses connections|the connection to Redis was closed or reset|Redis did not answer within 2000 ms)/,
    );
  }
});

test("Redis's not-now answers are named for what happened; an error in a command is not one of them", () => {
  const named = (err: unknown) => notReady(err)?.message;
  expect(named(new Error("LOADING Redis is loading the dataset in memory"))).toBe("Redis is loading its data after a restart");
  expect(named(new Error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."))).toBe(
    "Redis is a replica that lost its primary",
  );
  expect(named(Object.assign(new Error("Connection closed"), { code: "ERR_REDIS_CONNECTION_CLOSED" }))).toBe(
    "the connection to Redis was closed or reset",
  );
  expect(named(new Error("ERR wrong number of arguments for 'hget' command"))).toBeUndefined();
});
