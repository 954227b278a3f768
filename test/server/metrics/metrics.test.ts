import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import { createKey } from "../../../runtime/server/keys/api-keys.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { Exposition } from "../../helpers/prometheus.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { startReceiver } from "../../helpers/webhook-receiver.ts";
import { until } from "../../helpers/until.ts";

const HOLD = resolve(import.meta.dir, "../../fixtures/hold-fixture.ts");

async function scrape(srv: TestServer, auth?: string | null): Promise<Exposition> {
  const res = await srv.call("GET", "/metrics", undefined, auth === undefined ? {} : { auth });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  return new Exposition(await res.text());
}

describe("/metrics", () => {
  test("after a known sequence of jobs the counters, gauges and histograms say exactly what happened", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({
      clock,
      endpoints: { echo: {}, full: { workersMax: 0 }, tight: { rateLimits: { run: { requests: 1 } } } },
    });
    const w = protocolWorker(srv, "echo", "w1");
    const run = async (ep: string, policy?: unknown) => srv.json("POST", `/v2/${ep}/run`, { input: {}, ...(policy ? { policy } : {}) });

    // echo: one completed (queued 40 ms, ran 250 ms), one failed, one timed out, one cancelled.
    const [, a] = await run("echo");
    clock.advance(40);
    await w.take();
    clock.advance(250);
    await w.done(a.id, { output: 1 });
    const [, b] = await run("echo");
    await w.take();
    clock.advance(1_000);
    await w.done(b.id, { error: "boom" });
    await run("echo", { executionTimeout: 6_000 });
    await w.take();
    clock.advance(6_000);
    await srv.server.sweep();
    const [, d] = await run("echo");
    await srv.json("POST", `/v2/echo/cancel/${d.id}`);
    await srv.json("GET", `/v2/echo/status/${d.id}`);
    await srv.json("GET", `/v2/echo/status/${crypto.randomUUID()}`); // 404

    // full: 51 queued, the 52nd refused by backpressure; tight: the 2nd refused by its rate limit.
    for (let i = 0; i < 51; i++) await run("full");
    expect((await run("full"))[0]).toBe(429);
    expect((await run("tight"))[0]).toBe(200);
    expect((await run("tight"))[0]).toBe(429);

    const m = await scrape(srv);
    expect(["echo", "full", "tight"].map((endpoint) => m.value("spool_jobs_submitted_total", { endpoint }))).toEqual([4, 51, 1]);
    expect(
      ["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"].map((status) => m.value("spool_jobs_ended_total", { endpoint: "echo", status })),
    ).toEqual([1, 1, 1, 1]);
    expect(m.family("spool_requests_refused_total").metrics).toEqual([
      { value: "1", labels: { endpoint: "full", reason: "backpressure" } },
      { value: "1", labels: { endpoint: "tight", reason: "rate-limit" } },
    ]);
    expect(["echo", "full", "tight"].map((endpoint) => m.value("spool_queue_depth", { endpoint }))).toEqual([0, 51, 1]);
    expect(m.value("spool_jobs_in_progress", { endpoint: "echo" })).toBe(0);
    expect(["idle", "running", "initializing", "unhealthy"].map((state) => m.value("spool_workers", { endpoint: "echo", state }))).toEqual([
      1, 0, 0, 0,
    ]);

    // Three jobs started: delays 0.04, 0, 0 s; executions 0.25, 1 and 6 s.
    const delay = m.histogram("spool_job_delay_seconds", { endpoint: "echo" });
    expect([delay.count, delay.sum, delay.buckets["0.025"], delay.buckets["0.05"], delay.buckets["+Inf"]]).toEqual([3, 0.04, 2, 3, 3]);
    const exec = m.histogram("spool_job_execution_seconds", { endpoint: "echo" });
    expect([exec.count, exec.sum, exec.buckets["0.25"], exec.buckets["1"], exec.buckets["5"], exec.buckets["10"]]).toEqual([
      3, 7.25, 1, 2, 2, 3,
    ]);

    // Requests by route template: never a raw path or job id.
    expect(m.value("spool_http_requests_total", { method: "POST", route: "/v2/:endpoint/run", status: "200" })).toBe(4 + 51 + 1);
    expect(m.value("spool_http_requests_total", { method: "POST", route: "/v2/:endpoint/run", status: "429" })).toBe(2);
    expect(m.value("spool_http_requests_total", { method: "GET", route: "/v2/:endpoint/status/:id", status: "404" })).toBe(1);
    expect(m.value("spool_http_requests_total", { method: "GET", route: "/v2/:endpoint/job-take/:worker", status: "200" })).toBe(3);
    const routes = new Set(m.family("spool_http_requests_total").metrics.map((s) => s.labels?.route ?? ""));
    expect([...routes].filter((r) => !r.startsWith("/v2/:endpoint/"))).toEqual([]);

    // A retry of the failed job and a purge of full's queue: counted apart, so that submitted +
    // retried = ended + purged + what is still queued or running.
    expect((await srv.json("POST", `/v2/echo/retry/${b.id}`))[0]).toBe(200);
    expect((await srv.json("POST", "/v2/full/purge-queue"))[1].removed).toBe(51);
    const after = await scrape(srv);
    expect(after.value("spool_jobs_retried_total", { endpoint: "echo" })).toBe(1);
    expect(after.value("spool_jobs_purged_total", { endpoint: "full" })).toBe(51);
    expect(after.value("spool_queue_depth", { endpoint: "full" })).toBe(0);
    // A scrape reads the counts; it does not add them again.
    expect(after.value("spool_jobs_submitted_total", { endpoint: "full" })).toBe(51);
    expect(after.value("spool_jobs_ended_total", { endpoint: "echo", status: "COMPLETED" })).toBe(1);
    expect(after.value("spool_http_requests_total", { method: "GET", route: "/v2/:endpoint/job-take/:worker", status: "200" })).toBe(3);
    expect(after.value("spool_http_requests_total", { method: "GET", route: "/metrics", status: "200" })).toBe(1);

    // Process metrics.
    expect(m.value("process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(m.value("process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(m.family("spool_queue_depth").help).toContain("same on every server");
    expect(m.family("spool_jobs_submitted_total").help).toContain("sum over them");
  });

  test("a key is required unless server.metricsPublic; worker and endpoint-restricted keys are refused", async () => {
    await using srv = await startTestServer();
    const noKey = await srv.json("GET", "/metrics", undefined, { auth: null });
    expect(noKey).toEqual([401, { error: "missing API key: send Authorization: Bearer <key>" }]);
    expect((await srv.call("GET", "/metrics", undefined, { auth: "Bearer nope" })).status).toBe(401);
    const worker = await createKey(srv.store, "w", srv.clock.now(), { scope: "worker" });
    expect(await srv.json("GET", "/metrics", undefined, { auth: `Bearer ${worker.key}` })).toEqual([
      401,
      { error: "this API key is a worker key; /metrics needs a full or read-only key" },
    ]);
    const narrow = await createKey(srv.store, "n", srv.clock.now(), { scope: "read-only", endpoints: ["echo"] });
    expect((await srv.call("GET", "/metrics", undefined, { auth: `Bearer ${narrow.key}` })).status).toBe(401);
    const reader = await createKey(srv.store, "r", srv.clock.now(), { scope: "read-only" });
    await scrape(srv, reader.key); // the bare key form works too

    await using open = await startTestServer({ server: { metricsPublic: true } });
    const m = await scrape(open, null);
    expect(m.value("spool_queue_depth", { endpoint: "echo" })).toBe(0);
  });

  test("webhook deliveries by outcome", async () => {
    const clock = new ManualClock();
    await using receiver = startReceiver([500, 200]);
    await using srv = await startTestServer({ clock });
    const w = protocolWorker(srv, "echo", "w1");
    const [, job] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: receiver.url });
    await w.take();
    await w.done(job.id, { output: 1 });
    await receiver.received(1);
    await until(async () => (await scrape(srv)).value("spool_webhook_deliveries_total", { outcome: "retried" }) === 1, "a retried attempt");
    clock.advance(10_000);
    await receiver.received(2);
    await until(async () => (await scrape(srv)).value("spool_webhook_deliveries_total", { outcome: "delivered" }) === 1, "a delivery");
    expect((await scrape(srv)).value("spool_webhook_deliveries_total", { outcome: "given_up" })).toBe(0);
  });

  test("scale-ups and scale-downs of the scaler", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await startTestServer({
      clock,
      server: { takeWaitMs: 80_000, stopWaitMs: 80_000, scaleIntervalMs: 3_600_000 },
      endpoints: { ep: { handler: HOLD, idleTimeout: 1, workersMax: 1, scalerType: "REQUEST_COUNT", scalerValue: 1 } },
    });
    const scaler = srv.server.scaler;
    const [, job] = await srv.json("POST", "/v2/ep/run", { input: { hold: true } });
    await scaler.tick();
    expect((await scrape(srv)).value("spool_workers", { endpoint: "ep", state: "initializing" })).toBe(1);
    await until(async () => (await srv.json("GET", "/v2/ep/health"))[1].jobs.inProgress === 1, "the worker running the job");
    await srv.json("POST", `/v2/ep/cancel/${job.id}`);
    await until(async () => (await srv.json("GET", "/v2/ep/health"))[1].workers.idle === 1, "an idle worker");
    clock.advance(1_000);
    await scaler.tick();
    const m = await scrape(srv);
    expect([m.value("spool_scale_ups_total", { endpoint: "ep" }), m.value("spool_scale_downs_total", { endpoint: "ep" })]).toEqual([1, 1]);
  });
});
