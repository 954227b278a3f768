import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import { RedisStore } from "../../../runtime/server/store/redis/redis-store.ts";
import { redisUrl } from "../../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";

// Rate limits hold under a burst of parallel HTTP requests: on one server on the embedded store,
// and across two servers sharing one Redis, exactly the limit is accepted and the rest get 429.
// Each server runs on a ManualClock that never moves, so the whole burst falls in one window
// however slow the machine; the window is an hour so that Redis's counter (which expires after
// two windows of real time) outlives the test as well.
const LIMIT = 30;
const BURST = 100;
const endpoints = { echo: { rateLimits: { run: { requests: LIMIT } } } };
const server = { rateWindowMs: 3_600_000 };
const retention = { syncMs: 60_000, asyncMs: 60_000 };

async function burst(servers: TestServer[], key: string): Promise<number[]> {
  return Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      const srv = servers[i % servers.length]!;
      const res = await fetch(`${srv.url}/v2/echo/run`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ input: { i } }),
      });
      await res.body?.cancel();
      return res.status;
    }),
  );
}

const tally = (codes: number[]) => ({ accepted: codes.filter((c) => c === 200).length, refused: codes.filter((c) => c === 429).length });

describe("rate limits under parallel requests", () => {
  test(`one server on the embedded store: ${BURST} at once, exactly ${LIMIT} accepted and queued`, async () => {
    await using srv = await startTestServer({ endpoints, server, clock: new ManualClock() });
    expect(tally(await burst([srv], srv.key))).toEqual({ accepted: LIMIT, refused: BURST - LIMIT });
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(LIMIT);
  });

  test(`two servers sharing Redis: ${BURST} at once across both, exactly ${LIMIT} accepted and queued`, async () => {
    const url = await redisUrl();
    const prefix = `{t-${crypto.randomUUID().slice(0, 8)}}:`;
    await using a = await startTestServer({
      endpoints,
      server,
      clock: new ManualClock(),
      store: await RedisStore.connect(url, { retention }, prefix),
    });
    await using b = await startTestServer({
      endpoints,
      server,
      clock: new ManualClock(),
      store: await RedisStore.connect(url, { retention }, prefix),
    });
    // Both servers know the key of either: keys live in the shared store.
    expect(tally(await burst([a, b], a.key))).toEqual({ accepted: LIMIT, refused: BURST - LIMIT });
    expect((await b.json("GET", "/v2/echo/health", undefined, { auth: a.key }))[1].jobs.inQueue).toBe(LIMIT);
  });
});
