import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import type { ReceivedCall } from "../../helpers/webhook-receiver.ts";
import { until } from "../../helpers/until.ts";
import { spoolCluster, type StoreKind } from "./spool-process.ts";

// A webhook call in flight when the server is killed -9 is owed still: after the restart it goes
// out again (once its lease runs out) with the same webhook-id, so the receiver can tell it is
// the same message.

// A first attempt that timed out would be retried only an hour later: a second call within the
// test can only be the lease of the cut-off call running out.
const CONFIG = `
[server]
webhookAllow = ["127.0.0.1"]
webhookTimeoutMs = 1500
webhookRetryDelayMs = 3600000

[endpoints.echo]
`;

/** A receiver that never answers its first call (the kill ends it) and answers 200 after. */
function holdingReceiver() {
  const calls: ReceivedCall[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(req) {
      calls.push({ headers: Object.fromEntries(req.headers), body: await req.text() });
      if (calls.length === 1) await new Promise(() => {});
      return new Response("ok");
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    calls,
    async [Symbol.asyncDispose]() {
      await server.stop(true);
    },
  };
}

async function webhookAcrossKill(kind: StoreKind) {
  await using cluster = await spoolCluster(kind, 1, CONFIG);
  await using receiver = holdingReceiver();
  const server = cluster.nodes[0]!;
  const api = (path: string, body?: unknown, auth = `Bearer ${cluster.key}`) =>
    fetch(`${server.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: auth },
      body: JSON.stringify(body),
    });

  const { id } = (await (await api("/v2/echo/run", { input: { n: 1 }, webhook: receiver.url })).json()) as { id: string };
  const job = (await (await api("/v2/echo/job-take/w1?gpu=test&job_in_progress=0", undefined, cluster.key)).json()) as { id: string };
  expect(job.id).toBe(id);
  expect((await api(`/v2/echo/job-done/w1/${id}?gpu=test&isStream=false`, { output: { n: 2 } }, cluster.key)).status).toBe(200);

  await until(() => receiver.calls.length === 1, "the first webhook call");
  await server.kill9();
  await server.restart();
  // Its lease (webhookTimeoutMs + 5 s) must run out first: a wait on a condition, not on time.
  await until(() => receiver.calls.length === 2, "the webhook call again after the restart", 25_000);

  const [first, second] = receiver.calls as [ReceivedCall, ReceivedCall];
  expect(first.headers["webhook-id"]).toMatch(/^msg_/);
  expect(second.headers["webhook-id"]).toBe(first.headers["webhook-id"]!);
  expect(JSON.parse(second.body)).toEqual({
    id,
    status: "COMPLETED",
    output: { n: 2 },
    delayTime: expect.any(Number),
    executionTime: expect.any(Number),
    workerId: "w1",
  });
  expect(second.body).toBe(first.body);

  // Once answered, the store owes nothing more: no third call will come.
  await until(async () => (await owedDeliveries(cluster)) === 0, "the delivery to be settled");
  expect(receiver.calls.length).toBe(2);
}

async function owedDeliveries(cluster: { dbPath: string; redis?: { url: string; prefix: string } }): Promise<number> {
  if (cluster.redis) {
    const redis = new Bun.RedisClient(cluster.redis.url);
    try {
      return Number(await redis.send("ZCARD", [`{${cluster.redis.prefix}}:dl`]));
    } finally {
      redis.close();
    }
  }
  const db = new Database(cluster.dbPath, { readonly: true });
  try {
    return db.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_deliveries").get()!.n;
  } finally {
    db.close();
  }
}

describe("a webhook call in flight at kill -9", () => {
  test.concurrent("embedded SQLite store: delivered after the restart with the same webhook-id", () => webhookAcrossKill("sqlite"), 40_000);
  test.concurrent("Redis: delivered after the restart with the same webhook-id", () => webhookAcrossKill("redis"), 40_000);
});
