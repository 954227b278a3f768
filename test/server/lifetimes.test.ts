import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { parked, startTestServer } from "../helpers/test-server.ts";

const MIN = 60_000;

async function completedJob(srv: Awaited<ReturnType<typeof startTestServer>>, path: "run" | "runsync") {
  const w = protocolWorker(srv, "echo", "w1");
  const submitted = srv.json("POST", `/v2/echo/${path}`, { input: {} });
  if (path === "runsync") await parked(srv);
  else await submitted;
  const job = await w.take();
  await w.done(job.id, { output: "ok" });
  expect((await submitted)[1].id).toBe(job.id);
  return job.id as string;
}

describe("retention after completion", () => {
  test("an async job's result stays 30 minutes, then the job is gone and cannot be retried", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const id = await completedJob(srv, "run");
    clock.advance(30 * MIN - 1);
    await srv.server.sweep();
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].output).toBe("ok");
    clock.advance(1);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
    await srv.server.sweep();
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
    expect((await srv.call("POST", `/v2/echo/retry/${id}`)).status).toBe(404);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.completed).toBe(0);
  });

  test("a sync job's result stays 60 seconds", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const id = await completedJob(srv, "runsync");
    expect(id.startsWith("sync-")).toBe(true);
    clock.advance(MIN - 1);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(200);
    clock.advance(1);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
  });

  test("status?ttl sets how much longer the job lives", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const id = await completedJob(srv, "run");
    expect((await srv.call("GET", `/v2/echo/status/${id}?ttl=${3 * 3600_000}`)).status).toBe(200);
    clock.advance(3 * 3600_000 - 1);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(200);
    clock.advance(1);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
  });
});

describe("ttl from submission", () => {
  test("a queued job past its ttl is gone and is never handed to a worker", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, policy: { ttl: 10_000 } });
    clock.advance(9_999);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_QUEUE");
    clock.advance(1);
    expect(await protocolWorker(srv, "echo", "w1").take()).toBeNull();
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
  });

  test("a running job past its ttl is removed and its worker told to stop", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, policy: { ttl: 10_000, executionTimeout: 60_000 } });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    clock.advance(10_000);
    await w.ping([id]);
    await srv.server.sweep();
    expect(await w.stops()).toEqual([id]);
    expect((await srv.call("GET", `/v2/echo/status/${id}`)).status).toBe(404);
  });
});

describe("execution timeout", () => {
  test("a running job past its executionTimeout is TIMED_OUT, its worker is told, a late done changes nothing, and it can be retried", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { v: 1 }, policy: { executionTimeout: 6_000 } });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    clock.advance(5_999);
    await w.ping([id]);
    await srv.server.sweep();
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
    clock.advance(1);
    await srv.server.sweep();
    const [, timedOut] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(timedOut).toEqual({
      id,
      status: "TIMED_OUT",
      error: "execution timeout of 6000 ms exceeded",
      delayTime: 0,
      executionTime: 6_000,
      workerId: "w1",
    });
    expect(await w.stops()).toEqual([id]);
    await w.done(id, { output: "too late" });
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("TIMED_OUT");
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.failed).toBe(1);

    expect(await srv.json("POST", `/v2/echo/retry/${id}`)).toEqual([200, { id, status: "IN_QUEUE" }]);
    expect((await w.take()).input).toEqual({ v: 1 });
  });
});

describe("worker loss", () => {
  test("a worker that stops pinging loses its job: re-queued once, then FAILED naming the lost worker", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { workerLossTimeoutMs: 30_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const first = protocolWorker(srv, "echo", "gone-1");
    await first.take();
    clock.advance(29_999);
    await srv.server.sweep();
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
    clock.advance(1);
    await srv.server.sweep();
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toEqual({ id, status: "IN_QUEUE", queuePosition: 0 });
    expect((await srv.json("GET", "/v2/echo/health"))[1].workers).toEqual({ idle: 0, running: 0, initializing: 0, unhealthy: 0 });

    const second = protocolWorker(srv, "echo", "gone-2");
    expect((await second.take()).id).toBe(id);
    // The first worker's late result is not accepted: the job is now the second's.
    await first.done(id, { output: "stale" });
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
    clock.advance(30_000);
    await srv.server.sweep();
    const [, failed] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(failed.status).toBe("FAILED");
    expect(failed.error).toContain("worker gone-2 was lost");
  });

  test("a job the worker's heartbeat stops listing (its take answer was lost) is re-queued after the grace period", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { pingGraceMs: 30_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take(); // imagine this answer never reached the worker: its pings do not list the job
    clock.advance(29_999);
    await w.ping([]);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
    clock.advance(1);
    await w.ping([]);
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toEqual({ id, status: "IN_QUEUE", queuePosition: 0 });
    expect((await w.take()).id).toBe(id);
  });

  test("a worker that keeps pinging keeps its job", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { workerLossTimeoutMs: 30_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    for (let i = 0; i < 10; i++) {
      clock.advance(10_000);
      await w.ping([id]);
      await srv.server.sweep();
    }
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_PROGRESS");
  });
});

describe("runsync and status-sync waits", () => {
  test("a runsync not done in time answers with its id and current status; the client goes on with status", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const pending = srv.json("POST", "/v2/echo/runsync?wait=1000", { input: {} });
    await parked(srv);
    clock.advance(1_000);
    const [code, body] = await pending;
    expect(code).toBe(200);
    expect(body).toEqual({ id: expect.stringMatching(/^sync-/), status: "IN_QUEUE" });
    const w = protocolWorker(srv, "echo", "w1");
    await w.done((await w.take()).id, { output: 7 });
    expect((await srv.json("GET", `/v2/echo/status/${body.id}`))[1].output).toBe(7);
  });

  test("runsync waits 90 s by default", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const pending = srv.json("POST", "/v2/echo/runsync", { input: {} });
    await parked(srv);
    const parkedAt = clock.now();
    clock.advance(89_999);
    // The runsync's wait is still parked on the clock, due at 90 s: a shorter wait would have
    // been woken (and taken off the clock) by this advance.
    expect(clock.dueTimes).toContain(parkedAt + 90_000);
    clock.advance(1);
    expect((await pending)[1].status).toBe("IN_QUEUE");
  });
});
