import { describe, expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

describe("submit and poll", () => {
  test("run queues a job; a worker completes it; status shows output and times in ms", async () => {
    await using srv = await startTestServer();
    const [code, queued] = await srv.json("POST", "/v2/echo/run", { input: { text: "hi" } });
    expect(code).toBe(200);
    expect(queued).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: "IN_QUEUE" });

    expect((await srv.json("GET", `/v2/echo/status/${queued.id}`))[1]).toEqual({ id: queued.id, status: "IN_QUEUE", queuePosition: 0 });

    const w = protocolWorker(srv, "echo", "w1");
    const job = await w.take();
    expect(job).toEqual({
      id: queued.id,
      input: { text: "hi" },
      policy: { executionTimeout: 600000, lowPriority: false, ttl: 86400000 },
      deadline: expect.any(Number),
    });
    const [, running] = await srv.json("GET", `/v2/echo/status/${queued.id}`);
    expect(running).toEqual({ id: queued.id, status: "IN_PROGRESS", delayTime: expect.any(Number), workerId: "w1" });

    expect((await w.done(job.id, { output: { echoed: "hi" } })).status).toBe(200);
    const [, done] = await srv.json("GET", `/v2/echo/status/${queued.id}`);
    expect(done).toEqual({
      id: queued.id,
      status: "COMPLETED",
      output: { echoed: "hi" },
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "w1",
    });
    expect(done.delayTime).toBeGreaterThanOrEqual(0);
    expect(done.executionTime).toBeGreaterThanOrEqual(0);
  });

  test("runsync answers with the output once a worker finishes; its id starts with sync-", async () => {
    // The worker's take is parked before the job exists and wakes when it arrives.
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 } });
    const w = protocolWorker(srv, "echo", "w1");
    const worker = (async () => {
      const job = await w.take();
      await w.done(job.id, { output: { n: job.input.n * 2 } });
    })();
    const [code, body] = await srv.json("POST", "/v2/echo/runsync", { input: { n: 21 } });
    await worker;
    expect(code).toBe(200);
    expect(body).toEqual({
      id: expect.stringMatching(/^sync-/),
      status: "COMPLETED",
      output: { n: 42 },
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "w1",
    });
  });

  test("status-sync waits for a final state", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const pending = srv.json("GET", `/v2/echo/status-sync/${id}?wait=5000`);
    const w = protocolWorker(srv, "echo", "w1");
    await w.done((await w.take()).id, { output: [1, 2] });
    const [code, body] = await pending;
    expect(code).toBe(200);
    expect(body.status).toBe("COMPLETED");
    expect(body.output).toEqual([1, 2]);
  });

  test("jobs are taken oldest first", async () => {
    await using srv = await startTestServer();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    const w = protocolWorker(srv, "echo", "w1");
    const taken: string[] = [];
    for (let i = 0; i < 5; i++) taken.push((await w.take()).id);
    expect(taken).toEqual(ids);
  });

  test("s3Config goes to the worker and never into a response", async () => {
    await using srv = await startTestServer();
    const s3Config = { accessId: "AK", accessSecret: "very-secret", bucketName: "b", endpointUrl: "http://127.0.0.1:9/" };
    const run = await srv.call("POST", "/v2/echo/run", { input: {}, s3Config, webhook: "http://127.0.0.1:9/hook" });
    const { id } = (await run.json()) as { id: string };
    const job = await protocolWorker(srv, "echo", "w1").take();
    expect(job.s3Config).toEqual(s3Config);
    expect(job.webhook).toBe("http://127.0.0.1:9/hook");
    for (const path of [`/v2/echo/status/${id}`, `/v2/echo/requests`, `/v2/echo/stream/${id}`]) {
      const text = await (await srv.call("GET", path)).text();
      expect(text).not.toContain("very-secret");
      expect(text).not.toContain("accessId");
    }
  });
});

describe("authentication and routing", () => {
  test("both header forms are accepted; missing, wrong or revoked keys get 401", async () => {
    await using srv = await startTestServer();
    expect((await srv.call("GET", "/v2/echo/health", undefined, { auth: `Bearer ${srv.key}` })).status).toBe(200);
    expect((await srv.call("GET", "/v2/echo/health", undefined, { auth: srv.key })).status).toBe(200);
    const missing = await srv.json("GET", "/v2/echo/health", undefined, { auth: null });
    expect(missing).toEqual([401, { error: expect.stringContaining("missing API key") }]);
    const wrong = await srv.json("GET", "/v2/echo/health", undefined, { auth: "Bearer spool_nope" });
    expect(wrong).toEqual([401, { error: expect.stringContaining("invalid") }]);
    // A wrong key on an unknown endpoint is still 401: nothing leaks about which endpoints exist.
    expect((await srv.call("GET", "/v2/nope/health", undefined, { auth: "x" })).status).toBe(401);

    const record = (await srv.store.listKeys())[0]!;
    await srv.store.revokeKey(record.id, srv.clock.now());
    expect((await srv.call("GET", "/v2/echo/health")).status).toBe(401);
  });

  test("unknown endpoint, unknown job and unknown route are 404 with an error body", async () => {
    await using srv = await startTestServer();
    expect(await srv.json("POST", "/v2/nope/run", { input: {} })).toEqual([404, { error: "endpoint nope not found" }]);
    for (const [m, p] of [
      ["GET", "/v2/echo/status/nope"],
      ["GET", "/v2/echo/status-sync/nope?wait=0"],
      ["GET", "/v2/echo/stream/nope"],
      ["POST", "/v2/echo/cancel/nope"],
      ["POST", "/v2/echo/retry/nope"],
    ] as const) {
      const [code, body] = await srv.json(m, p);
      expect(code).toBe(404);
      expect(body.error).toContain("nope");
    }
    const [code, body] = await srv.json("GET", "/v2/echo/unknown-thing");
    expect(code).toBe(404);
    expect(body).toEqual({ error: expect.any(String) });
  });

  test("a job of one endpoint is not visible through another", async () => {
    await using srv = await startTestServer({ endpoints: { a: {}, b: {} } });
    const [, { id }] = await srv.json("POST", "/v2/a/run", { input: {} });
    expect((await srv.call("GET", `/v2/b/status/${id}`)).status).toBe(404);
    expect(await protocolWorker(srv, "b", "w").take()).toBeNull();
  });
});

describe("cancel, retry, purge", () => {
  test("cancel removes a queued job before it starts", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    expect(await srv.json("POST", `/v2/echo/cancel/${id}`, {})).toEqual([200, { id, status: "CANCELLED" }]);
    expect(await protocolWorker(srv, "echo", "w1").take()).toBeNull();
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("CANCELLED");
  });

  test("cancel stops a running job through job-stop; its late done changes nothing", async () => {
    await using srv = await startTestServer({ server: { stopWaitMs: 10_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    const stops = w.stops(); // long-poll parked before the cancel
    expect(await srv.json("POST", `/v2/echo/cancel/${id}`)).toEqual([200, { id, status: "CANCELLED" }]);
    expect(await stops).toEqual([id]);
    expect((await w.done(id, { output: "late" })).status).toBe(200);
    const [, after] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(after.status).toBe("CANCELLED");
    expect(after.output).toBeUndefined();
  });

  test("cancel never changes a finished job", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.done((await w.take()).id, { output: 1 });
    expect(await srv.json("POST", `/v2/echo/cancel/${id}`)).toEqual([200, { id, status: "COMPLETED" }]);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].output).toBe(1);
  });

  test("retry re-queues a FAILED job with the same id and input, removes its output, counts in health", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { x: 1 } });
    const w = protocolWorker(srv, "echo", "w1");
    const first = await w.take();
    await w.stream(id, "partial");
    await w.done(first.id, { error: "boom" });
    const [, failed] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(failed).toMatchObject({ id, status: "FAILED", error: "boom" });
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toEqual({ completed: 0, failed: 1, inProgress: 0, inQueue: 0, retried: 0 });

    expect(await srv.json("POST", `/v2/echo/retry/${id}`)).toEqual([200, { id, status: "IN_QUEUE" }]);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toEqual({ id, status: "IN_QUEUE", queuePosition: 0 });
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toEqual({ completed: 0, failed: 0, inProgress: 0, inQueue: 1, retried: 1 });

    const again = await w.take();
    expect(again).toMatchObject({ id, input: { x: 1 } });
    await w.done(id, { output: "ok" });
    // The earlier stream chunk went with the earlier output.
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1].stream).toEqual([{ output: "ok" }]);
  });

  test("retry is refused for jobs that are not FAILED or TIMED_OUT", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const [code, body] = await srv.json("POST", `/v2/echo/retry/${id}`);
    expect(code).toBe(400);
    expect(body.error).toContain("IN_QUEUE");
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.retried).toBe(0);
  });

  test("purge-queue removes waiting jobs only", async () => {
    await using srv = await startTestServer();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    const w = protocolWorker(srv, "echo", "w1");
    const running = await w.take();
    expect(await srv.json("POST", "/v2/echo/purge-queue", {})).toEqual([200, { removed: 2, status: "completed" }]);
    expect((await srv.call("GET", `/v2/echo/status/${ids[1]}`)).status).toBe(404);
    expect((await srv.json("GET", `/v2/echo/status/${running.id}`))[1].status).toBe("IN_PROGRESS");
    expect(await srv.json("POST", "/v2/echo/purge-queue")).toEqual([200, { removed: 0, status: "completed" }]);
  });
});

describe("health and requests", () => {
  test("health counts jobs and workers exactly", async () => {
    await using srv = await startTestServer();
    for (let i = 0; i < 4; i++) await srv.json("POST", "/v2/echo/run", { input: { i } });
    const a = protocolWorker(srv, "echo", "wa");
    const b = protocolWorker(srv, "echo", "wb");
    const j1 = await a.take();
    const j2 = await a.take();
    await b.ping();
    expect((await srv.json("GET", "/v2/echo/health"))[1]).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 2, inQueue: 2, retried: 0 },
      workers: { idle: 1, running: 1, initializing: 0, unhealthy: 0 },
    });
    await a.done(j1.id, { output: 1 });
    await a.done(j2.id, { error: "x" });
    expect((await srv.json("GET", "/v2/echo/health"))[1]).toEqual({
      jobs: { completed: 1, failed: 1, inProgress: 0, inQueue: 2, retried: 0 },
      workers: { idle: 2, running: 0, initializing: 0, unhealthy: 0 },
    });
  });

  test("requests lists recent jobs newest first, paginated", async () => {
    await using srv = await startTestServer();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    const [, page1] = await srv.json("GET", "/v2/echo/requests?limit=2");
    expect(page1.requests.map((r: any) => r.id)).toEqual([ids[4], ids[3]]);
    const [, page2] = await srv.json("GET", `/v2/echo/requests?limit=2&cursor=${page1.nextCursor}`);
    expect(page2.requests.map((r: any) => r.id)).toEqual([ids[2], ids[1]]);
    const [, page3] = await srv.json("GET", `/v2/echo/requests?limit=2&cursor=${page2.nextCursor}`);
    expect(page3.requests.map((r: any) => r.id)).toEqual([ids[0]]);
    expect(page3.nextCursor).toBeUndefined();
    expect(page1.requests[0]).toEqual({ id: ids[4], status: "IN_QUEUE", createdAt: expect.any(String), sync: false });
  });
});
