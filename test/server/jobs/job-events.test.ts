import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import type { JobEvent } from "../../../runtime/server/jobs/job-events.ts";
import { JobEvents } from "../../../runtime/server/jobs/job-events.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";

/** The events of the server, as [type, job id or endpoint, status or reason or worker]. */
function record(srv: TestServer): string[][] {
  const seen: string[][] = [];
  srv.jobEvents.on((e: JobEvent) => {
    if (e.type === "refused") seen.push([e.type, e.endpointId, e.reason]);
    else if (e.type === "taken") seen.push([e.type, e.job.id, e.workerId]);
    else if (e.type === "purged") seen.push([e.type, e.endpointId, String(e.count)]);
    else seen.push([e.type, e.job.id, e.job.status]);
  });
  return seen;
}

describe("job events", () => {
  test("a retry queues the job again and a purge removes queued jobs: both are events", async () => {
    await using srv = await startTestServer();
    const seen = record(srv);
    const w = protocolWorker(srv, "echo", "w1");
    const [, a] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await w.take();
    await w.done(a.id, { error: "boom" });
    expect((await srv.json("POST", `/v2/echo/retry/${a.id}`))[0]).toBe(200);
    const [, b] = await srv.json("POST", "/v2/echo/run", { input: {} });
    expect((await srv.json("POST", "/v2/echo/purge-queue"))[1].removed).toBe(2);
    expect((await srv.json("POST", "/v2/echo/purge-queue"))[1].removed).toBe(0); // nothing left: no event
    expect(seen).toEqual([
      ["submitted", a.id, "IN_QUEUE"],
      ["taken", a.id, "w1"],
      ["ended", a.id, "FAILED"],
      ["retried", a.id, "IN_QUEUE"],
      ["submitted", b.id, "IN_QUEUE"],
      ["purged", "echo", "2"],
    ]);
  });

  test("a job's life on this server: submitted, taken, ended with its final state", async () => {
    await using srv = await startTestServer();
    const seen = record(srv);
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    await w.take();
    await w.done(id, { output: { ok: 1 } });
    await w.done(id, { output: { ok: 2 } }); // a repeated post ends nothing
    expect(seen).toEqual([
      ["submitted", id, "IN_QUEUE"],
      ["taken", id, "w1"],
      ["ended", id, "COMPLETED"],
    ]);
  });

  test("ended carries a failure, a cancel (once) and an execution timeout found by the sweep", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const seen = record(srv);
    const w = protocolWorker(srv, "echo", "w1");
    const [, a] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await w.take();
    await w.done(a.id, { error: "boom" });
    const [, b] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await srv.json("POST", `/v2/echo/cancel/${b.id}`);
    clock.advance(1);
    await srv.json("POST", `/v2/echo/cancel/${b.id}`); // already final: nothing ends again
    const [, c] = await srv.json("POST", "/v2/echo/run", { input: {}, policy: { executionTimeout: 6_000 } });
    await w.take();
    clock.advance(6_000);
    await srv.server.sweep();
    expect(seen.filter((e) => e[0] === "ended")).toEqual([
      ["ended", a.id, "FAILED"],
      ["ended", b.id, "CANCELLED"],
      ["ended", c.id, "TIMED_OUT"],
    ]);
  });

  test("refusals: backpressure from the job path, rate limit from access", async () => {
    await using srv = await startTestServer({ endpoints: { echo: { workersMax: 0 }, tight: { rateLimits: { run: { requests: 1 } } } } });
    const seen = record(srv);
    for (let i = 0; i < 51; i++) await srv.json("POST", "/v2/echo/run", { input: {} });
    expect((await srv.call("POST", "/v2/echo/run", { input: {} })).status).toBe(429);
    expect((await srv.call("POST", "/v2/tight/run", { input: {} })).status).toBe(200);
    expect((await srv.call("POST", "/v2/tight/run", { input: {} })).status).toBe(429);
    expect(seen.filter((e) => e[0] === "refused")).toEqual([
      ["refused", "echo", "backpressure"],
      ["refused", "tight", "rate-limit"],
    ]);
  });

  test("a listener that throws is reported and fails nothing; a removed listener hears nothing more", () => {
    const errors: unknown[] = [];
    const events = new JobEvents((err) => errors.push(err));
    const heard: string[] = [];
    const off = events.on((e) => heard.push(e.type));
    events.on(() => {
      throw new Error("listener bug");
    });
    events.emit({ type: "refused", endpointId: "x", reason: "backpressure" });
    off();
    events.emit({ type: "refused", endpointId: "x", reason: "rate-limit" });
    expect(heard).toEqual(["refused"]);
    expect(errors.map(String)).toEqual(["Error: listener bug", "Error: listener bug"]);
  });
});
