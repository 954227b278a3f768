import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

describe("job-take", () => {
  test("an empty take is held open and wakes at once when a job arrives", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 30_000 } });
    const w = protocolWorker(srv, "echo", "w1");
    const take = w.take();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { a: 1 } });
    expect((await take).id).toBe(id);
  });

  test("an empty take answers 204 when its wait runs out", async () => {
    await using srv = await startTestServer();
    const res = await srv.call("GET", "/v2/echo/job-take/w1?gpu=x&job_in_progress=0", undefined, { auth: srv.key });
    expect(res.status).toBe(204);
  });

  test("job-take-batch hands out up to batch_size jobs, oldest first, as a JSON array", async () => {
    await using srv = await startTestServer();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    const w = protocolWorker(srv, "echo", "w1");
    const first = await w.takeBatch(3);
    expect(first.map((j) => j.id)).toEqual(ids.slice(0, 3));
    expect(first.map((j) => j.input)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect((await w.takeBatch(3)).map((j) => j.id)).toEqual(ids.slice(3));
    expect(await w.takeBatch(3)).toEqual([]);
  });

  test("a template without '?' still works: the appended &job_in_progress is cut from the worker id", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const res = await srv.call("GET", "/v2/echo/job-take/w9&job_in_progress=0", undefined, { auth: srv.key });
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(((await res.json()) as { id: string }).id).toBe(id);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].workerId).toBe("w9");
  });

  test("the taken job carries its execution deadline from the policy", async () => {
    // A manual clock: the deadline is exactly the take's time plus the timeout, however long
    // the requests take on the wall clock.
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, endpoints: { echo: { executionTimeout: 60_000 } } });
    await srv.json("POST", "/v2/echo/run", { input: {}, policy: { executionTimeout: 9_000, lowPriority: true } });
    await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    const takenAt = clock.now();
    const a = await w.take();
    const b = await w.take();
    expect(a.policy).toEqual({ executionTimeout: 9_000, lowPriority: true, ttl: 86_400_000 });
    expect(b.policy.executionTimeout).toBe(60_000);
    expect(a.deadline).toBe(takenAt + 9_000);
    expect(b.deadline).toBe(takenAt + 60_000);
  });
});

describe("job-done", () => {
  test("is parsed as JSON whatever the content type, and is idempotent", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    expect((await w.done(id, { output: { v: 1 } })).status).toBe(200);
    expect((await w.done(id, { output: { v: 2 } })).status).toBe(200);
    expect((await w.done(id, { error: "later" })).status).toBe(200);
    const [, body] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(body.status).toBe("COMPLETED");
    expect(body.output).toEqual({ v: 1 });
    expect(body.error).toBeUndefined();
  });

  test("a done from a worker that does not hold the job changes nothing", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await protocolWorker(srv, "echo", "w1").take();
    const other = protocolWorker(srv, "echo", "other");
    expect(await other.take()).toBeNull(); // a worker of the endpoint, holding nothing
    expect((await other.done(id, { output: "x" })).status).toBe(200); // idempotent: a late result changes nothing
    // A worker id never seen cannot hold a job: 404, and it is not recorded.
    const unknown = await protocolWorker(srv, "echo", "intruder").done(id, { output: "x" });
    expect([unknown.status, await unknown.json()]).toEqual([404, { error: "worker intruder not found" }]);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
    expect((await srv.json("GET", "/v2/echo/health"))[1].workers).toMatchObject({ idle: 1, running: 1 });
  });

  test("{status: IN_PROGRESS} posts are progress, shown by /status, not completion", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    await w.done(id, { status: "IN_PROGRESS", output: { percent: 40 } });
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toEqual({
      id,
      status: "IN_PROGRESS",
      output: { percent: 40 },
      delayTime: expect.any(Number),
      workerId: "w1",
    });
    await w.done(id, { output: "final" });
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].output).toBe("final");
  });

  test("a runpod-python handler error (JSON string) is kept as given and the job is FAILED", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    const error = JSON.stringify({
      error_type: "<class 'ValueError'>",
      error_message: "bad",
      error_traceback: "...",
      hostname: "h",
      worker_id: "w1",
      runpod_version: "1.12.0",
    });
    await w.done(id, { error });
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toMatchObject({ status: "FAILED", error });
  });
});

describe("stream", () => {
  test("each /stream call returns only chunks no earlier call returned, with the status", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    await w.stream(id, "a");
    await w.stream(id, { b: 2 });
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({
      id,
      status: "IN_PROGRESS",
      stream: [{ output: "a" }, { output: { b: 2 } }],
    });
    await w.stream(id, "c");
    await w.done(id, { output: ["a", { b: 2 }, "c"] }, true);
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({ id, status: "COMPLETED", stream: [{ output: "c" }] });
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({ id, status: "COMPLETED", stream: [] });
    // The aggregate is the job's output.
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].output).toEqual(["a", { b: 2 }, "c"]);
  });

  test("a /stream with nothing new waits for a chunk instead of answering empty at once", async () => {
    await using srv = await startTestServer({ server: { streamWaitMs: 30_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    const pending = srv.json("GET", `/v2/echo/stream/${id}`);
    await w.stream(id, "x");
    expect((await pending)[1].stream).toEqual([{ output: "x" }]);
  });

  test("a handler that does not stream returns its output as one chunk on completion", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    await w.done(id, { output: { all: "at once" } });
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({
      id,
      status: "COMPLETED",
      stream: [{ output: { all: "at once" } }],
    });
  });

  test("a chunk over 1 MB is split into pieces that join back to it", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    const big = "é".repeat(1_500_000); // 3 MB of UTF-8
    await w.stream(id, big);
    await w.done(id, { output: [] }, true);
    const [, body] = await srv.json("GET", `/v2/echo/stream/${id}`);
    expect(body.stream.length).toBe(4);
    for (const c of body.stream) expect(Buffer.byteLength(JSON.stringify(c.output))).toBeLessThanOrEqual(1_000_000);
    expect(body.stream.map((c: { output: string }) => c.output).join("")).toBe(big);
  });
});

describe("ping and job-stop", () => {
  test("pings keep a worker alive in health; an unhealthy report counts it unhealthy until a healthy ping", async () => {
    await using srv = await startTestServer();
    const w = protocolWorker(srv, "echo", "w1");
    expect((await w.ping()).status).toBe(200);
    expect((await srv.json("GET", "/v2/echo/health"))[1].workers).toEqual({ idle: 1, running: 0, initializing: 0, unhealthy: 0 });
    const res = await srv.call("GET", "/v2/echo/ping/w1?status=unhealthy&check=gpu&reason=ECC", undefined, { auth: srv.key });
    expect(res.status).toBe(200);
    expect((await srv.json("GET", "/v2/echo/health"))[1].workers).toEqual({ idle: 0, running: 0, initializing: 0, unhealthy: 1 });
    expect((await w.ping()).status).toBe(200);
    expect((await srv.json("GET", "/v2/echo/health"))[1].workers).toEqual({ idle: 1, running: 0, initializing: 0, unhealthy: 0 });
  });

  test("job-stop answers 204 when there is nothing to stop", async () => {
    await using srv = await startTestServer();
    const res = await srv.call("GET", "/v2/echo/job-stop/w1?gpu=x", undefined, { auth: srv.key });
    expect(res.status).toBe(204);
  });

  test("a stop is delivered once, to the worker that holds the job", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w1 = protocolWorker(srv, "echo", "w1");
    const w2 = protocolWorker(srv, "echo", "w2");
    await w1.take();
    await srv.json("POST", `/v2/echo/cancel/${id}`);
    expect(await w2.stops()).toEqual([]);
    expect(await w1.stops()).toEqual([id]);
    expect(await w1.stops()).toEqual([]);
  });
});

describe("stream elements", () => {
  test("a yielded value is wrapped as {output}; a chunk already shaped {output, metrics} is passed as it is", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    const specChunk = { output: { input_tokens: 3, output_tokens: 1, text: ["a"] }, metrics: { stream_index: 0 } };
    await w.stream(id, "plain");
    await w.stream(id, specChunk);
    await w.stream(id, { output: "only output" });
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1].stream).toEqual([
      { output: "plain" },
      specChunk,
      { output: { output: "only output" } },
    ]);
  });
});
