import { describe, expect, test } from "bun:test";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { RETENTION } from "../store/store-suite.ts";

/** A value well past the size whose JSON text is carried as stored, with every kind of character JSON escapes or encodes. */
const big = (tag: string) => ({
  tag,
  text: `"quoted" back\\slash\nnew line\ttab \u0001 é 中 😀 \u2028 `.repeat(300),
  list: Array.from({ length: 200 }, (_, i) => ({ i, half: i / 2, big: 1e21 * i, neg: -i - 1, ok: i % 2 === 0, none: null })),
});

const stores = {
  sqlite: async () => undefined, // the test server's own
  redis: async () => RedisStore.connect(await redisUrl(), { retention: RETENTION }, `{large-${crypto.randomUUID().slice(0, 8)}}:`),
};

describe.each(Object.entries(stores))("%s store", (_, store) => {
  test("a large input and result arrive unchanged through job-take, job-take-batch, status, status-sync, runsync and the event stream", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 }, store: await store() });
    const w = protocolWorker(srv, "echo", "w1");
    const [, a] = await srv.json("POST", "/v2/echo/run", { input: big("a") });
    const [, b] = await srv.json("POST", "/v2/echo/run", { input: big("b") });
    const taken = await w.take();
    expect(taken).toMatchObject({ id: a.id, input: big("a"), policy: expect.any(Object), deadline: expect.any(Number) });
    const [batch] = await w.takeBatch(2);
    expect(batch).toMatchObject({ id: b.id, input: big("b") });

    expect((await w.done(a.id, { output: big("out") })).status).toBe(200);
    const status = await srv.call("GET", `/v2/echo/status/${a.id}`, undefined, { auth: srv.key });
    expect(status.headers.get("content-type")).toContain("application/json");
    const body = await status.json();
    expect(body).toEqual({
      id: a.id,
      status: "COMPLETED",
      output: big("out"),
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "w1",
    });
    expect((await srv.json("GET", `/v2/echo/status-sync/${a.id}`))[1]).toEqual(body);

    const events = await fetch(`${srv.url}/v2/echo/status/${a.id}`, {
      headers: { authorization: `Bearer ${srv.key}`, accept: "text/event-stream" },
    });
    const stream = await events.text();
    const data = /event: status\nid: [^\n]*\ndata: ([^\n]*)\n/.exec(stream)?.[1];
    expect(JSON.parse(data!)).toEqual(body);

    // A failed job with a large error is answered as before (only a completed job's output is carried as text).
    expect((await w.done(b.id, { error: "x".repeat(5_000) })).status).toBe(200);
    expect((await srv.json("GET", `/v2/echo/status/${b.id}`))[1]).toMatchObject({ status: "FAILED", error: "x".repeat(5_000) });

    const worker = (async () => {
      const job = await w.take();
      await w.done(job.id, { output: { echo: job.input } });
    })();
    const [code, sync] = await srv.json("POST", "/v2/echo/runsync", { input: big("sync") });
    await worker;
    expect([code, sync.status, sync.output]).toEqual([200, "COMPLETED", { echo: big("sync") }]);
  });
});
