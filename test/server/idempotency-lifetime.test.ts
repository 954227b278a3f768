import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { RETENTION } from "../store/store-suite.ts";

const stores = {
  sqlite: async () => undefined, // the test server's own
  redis: async () => RedisStore.connect(await redisUrl(), { retention: RETENTION }, `{idem-${crypto.randomUUID().slice(0, 8)}}:`),
};

/** A POST with an Idempotency-Key and a body given as text, so that its keys keep the order written. */
const post = (srv: TestServer, path: string, key: string, body: string) =>
  srv.call("POST", path, body, { headers: { "idempotency-key": key } });

/** The jobs the server keeps for echo, by state. */
const jobs = async (srv: TestServer) => (await srv.json("GET", "/v2/echo/health"))[1].jobs as Record<string, number>;

describe("Idempotency-Keys outlive their jobs", () => {
  test.each(Object.keys(stores) as (keyof typeof stores)[])(
    "%s: /runsync retried with its key after its job is gone is a 409 naming the key and the job, never a second run",
    async (name) => {
      const clock = new ManualClock();
      await using srv = await startTestServer({ clock, store: await stores[name]() });
      const worker = protocolWorker(srv, "echo", "w1");
      const body = JSON.stringify({ input: { v: 7 } });
      const first = post(srv, "/v2/echo/runsync", "sync-1", body);
      const job = await until(() => worker.take(), "the runsync job to be queued");
      await worker.done(job.id, { output: { v: 7 } });
      expect(await (await first).json()).toMatchObject({ id: job.id, status: "COMPLETED", output: { v: 7 } });

      // Within its retention (60 s for a runsync job) a retry answers the job's final state and output.
      clock.advance(30_000);
      const kept = await post(srv, "/v2/echo/runsync", "sync-1", body);
      expect([kept.status, await kept.json()]).toMatchObject([200, { id: job.id, status: "COMPLETED", output: { v: 7 } }]);

      // 65 s after it ended the job is gone, before the sweep and after it: the key still names it.
      clock.advance(35_000);
      const gone = {
        error: `Idempotency-Key "sync-1" was used for job ${job.id}, which is no longer kept (it ended longer ago than its retention, or expired or was purged); it is not run again: a new request needs a new key`,
      };
      for (const swept of [false, true]) {
        if (swept) await srv.server.sweep();
        const run = await post(srv, "/v2/echo/run", "sync-1", body);
        expect({ swept, status: run.status, body: await run.json() }).toEqual({ swept, status: 409, body: gone });
        const retried = await post(srv, "/v2/echo/runsync?wait=1000", "sync-1", body);
        expect({ swept, status: retried.status, body: await retried.json() }).toEqual({ swept, status: 409, body: gone });
      }
      expect(await worker.take()).toBeNull();
      expect(await jobs(srv)).toMatchObject({ inQueue: 0, inProgress: 0 });
    },
  );

  test("the body is compared in canonical form: the order of its object keys does not matter, an array's does", async () => {
    await using srv = await startTestServer();
    const a = await post(
      srv,
      "/v2/echo/run",
      "order-1",
      '{"input":{"a":1,"b":{"x":1,"y":[1,2]}},"policy":{"ttl":60000,"lowPriority":false}}',
    );
    const b = await post(
      srv,
      "/v2/echo/run",
      "order-1",
      '{"policy":{"lowPriority":false,"ttl":60000},"input":{"b":{"y":[1,2],"x":1},"a":1}}',
    );
    const { id } = (await a.json()) as { id: string };
    expect([a.status, b.status, await b.json()]).toEqual([200, 200, { id, status: "IN_QUEUE" }]);
    const swapped = await post(
      srv,
      "/v2/echo/run",
      "order-1",
      '{"input":{"a":1,"b":{"x":1,"y":[2,1]}},"policy":{"ttl":60000,"lowPriority":false}}',
    );
    expect([swapped.status, await swapped.json()]).toEqual([
      422,
      {
        error: `Idempotency-Key already used for job ${id} with another request body: a retry must send the same body; a new request needs a new key`,
      },
    ]);
    expect((await jobs(srv)).inQueue).toBe(1);
  });

  test("submissions sent together with one key make one job", async () => {
    await using srv = await startTestServer();
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(srv, "/v2/echo/run", "together", '{"input":{"n":1}}')));
    const ids = await Promise.all(answers.map(async (r) => ((await r.json()) as { id: string }).id));
    expect([answers.map((r) => r.status), new Set(ids).size]).toEqual([Array(8).fill(200), 1]);
    expect((await jobs(srv)).inQueue).toBe(1);
  });

  test("a key past idempotencyTtlMs is free again, even while its job is kept", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { idempotencyTtlMs: 120_000 } });
    const body = '{"input":{"n":1}}';
    const { id: first } = (await (await post(srv, "/v2/echo/run", "order-9", body)).json()) as { id: string };
    clock.advance(119_999);
    expect(await (await post(srv, "/v2/echo/run", "order-9", body)).json()).toEqual({ id: first, status: "IN_QUEUE" });
    clock.advance(1); // free at once, before any sweep removes it
    const again = (await (await post(srv, "/v2/echo/run", "order-9", body)).json()) as { id: string };
    expect(again.id).not.toBe(first);
    expect((await jobs(srv)).inQueue).toBe(2);
    // The new job holds the key now.
    expect(await (await post(srv, "/v2/echo/run", "order-9", body)).json()).toEqual({ id: again.id, status: "IN_QUEUE" });
  });
});
