import { expect, test } from "bun:test";
import { createServer } from "node:net";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { notReady } from "../../runtime/server/store/redis/redis-watchdog.ts";
import { startOwnRedis } from "../helpers/redis-server.ts";
import { startTestServer } from "../helpers/test-server.ts";
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

test("while redis-server restarts and loads its append-only file under load, requests answer 503 with Retry-After naming why, never 500, and 200 again after", async () => {
  // key-load-delay slows loading per key, so the load is long enough to be met by requests.
  await using redis = await startOwnRedis({ aof: true, args: ["--key-load-delay", "20"] });
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
  let restarted = false;
  let okAfter = 0;
  const client = async () => {
    while (okAfter < 20) {
      const res = await server.call("POST", "/v2/echo/run", { input: {} });
      const body = (await res.json()) as { error?: string };
      answers.push({ status: res.status, retryAfter: res.headers.get("retry-after"), error: body.error });
      if (restarted && res.status === 200) okAfter++;
    }
  };
  const load = Promise.all([client(), client(), client(), client()]);
  await redis.restart();
  restarted = true;
  await load;
  const failed = answers.filter((a) => a.status !== 200);
  // Bun's client holds most commands while Redis loads (answered late, within the reply
  // timeout), so how many are refused varies; each that is must be a named 503.
  expect(answers.length).toBeGreaterThan(20);
  for (const a of failed) {
    expect(a.status).toBe(503);
    expect(a.retryAfter).toBe("1");
    expect(a.error).toMatch(/^store unavailable: (Redis is loading its data after a restart|Redis refuses connections|the connection to Redis was closed or reset|Redis did not answer within 2000 ms)/);
  }
});

test("Redis's not-now answers are named for what happened; an error in a command is not one of them", () => {
  const named = (err: unknown) => notReady(err)?.message;
  expect(named(new Error("LOADING Redis is loading the dataset in memory"))).toBe("Redis is loading its data after a restart");
  expect(named(new Error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."))).toBe("Redis is a replica that lost its primary");
  expect(named(Object.assign(new Error("Connection closed"), { code: "ERR_REDIS_CONNECTION_CLOSED" }))).toBe("the connection to Redis was closed or reset");
  expect(named(new Error("ERR wrong number of arguments for 'hget' command"))).toBeUndefined();
});
