import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import { JobEvents } from "../../../runtime/server/jobs/job-events.ts";
import { EndpointStatsRecorder } from "../../../runtime/server/metrics/endpoint-stats.ts";
import type { StoredJob } from "../../../runtime/server/store/store.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer } from "../../helpers/test-server.ts";

const START = Date.UTC(2026, 0, 1); // a whole minute

/** A job that ended now after waiting `delay` ms and running `exec` ms (exec undefined: never started). */
function ended(clock: ManualClock, status: StoredJob["status"], delay?: number, exec?: number, endpointId = "ep"): StoredJob {
  const now = clock.now();
  const startedAt = delay === undefined ? undefined : now - (exec ?? 0);
  return {
    id: crypto.randomUUID(),
    endpointId,
    status,
    input: {},
    policy: { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 },
    sync: false,
    createdAt: (startedAt ?? now) - (delay ?? 0),
    queuedAt: (startedAt ?? now) - (delay ?? 0),
    startedAt,
    completedAt: now,
    expiresAt: now + 60_000,
    losses: 0,
    retries: 0,
  };
}

const emptySeries = (now: number) =>
  Array.from({ length: 30 }, (_, i) => ({ minute: now - (29 - i) * 60_000, ended: 0, failed: 0, delayP50: null, executionP50: null }));

describe("endpoint stats", () => {
  test("an endpoint with no ended jobs has zeros, nulls and 30 empty minutes", () => {
    const clock = new ManualClock(START);
    const stats = new EndpointStatsRecorder(new JobEvents(), clock);
    expect(stats.get("ep")).toEqual({
      endpointId: "ep",
      jobsPerMinute: 0,
      delayMs: { p50: null, p95: null },
      executionMs: { p50: null, p95: null },
      series: emptySeries(START),
    });
  });

  test("throughput over 60 s, nearest-rank percentiles over 15 minutes, a per-minute series over 30", () => {
    const clock = new ManualClock(START);
    const events = new JobEvents();
    const stats = new EndpointStatsRecorder(events, clock);
    // Minute 0: 20 completed jobs, delays 1..20 ms, executions 10..200 ms; one failure; a
    // cancel that never started (counted as ended, no durations); another endpoint's job.
    for (let i = 1; i <= 20; i++) events.emit({ type: "ended", job: ended(clock, "COMPLETED", i, i * 10) });
    events.emit({ type: "ended", job: ended(clock, "TIMED_OUT", 5, 6_000) });
    events.emit({ type: "ended", job: ended(clock, "CANCELLED") });
    events.emit({ type: "ended", job: ended(clock, "COMPLETED", 999, 999, "other") });
    events.emit({ type: "submitted", job: ended(clock, "IN_QUEUE") }); // not an end: ignored

    clock.advance(30_000);
    const a = stats.get("ep");
    expect(a.jobsPerMinute).toBe(22);
    // 21 delays: 1..20 and 5 -> sorted 1,2,3,4,5,5,6,...; rank ceil(0.5*21)=11 -> 10; rank ceil(0.95*21)=20 -> 19
    expect(a.delayMs).toEqual({ p50: 10, p95: 19 });
    // 21 executions: 10..200 and 6000 -> rank 11 -> 110; rank 20 -> 200
    expect(a.executionMs).toEqual({ p50: 110, p95: 200 });
    expect(a.series.at(-1)).toEqual({ minute: START, ended: 22, failed: 1, delayP50: 10, executionP50: 110 });

    // 61 s after the first jobs: they leave the per-minute rate, not the percentiles.
    clock.advance(31_000);
    events.emit({ type: "ended", job: ended(clock, "FAILED", 2_345_678, 1) });
    const b = stats.get("ep");
    expect(b.jobsPerMinute).toBe(1);
    expect(b.delayMs.p95).toBe(20); // 22 delays now: rank ceil(0.95*22)=21 -> 20
    // Durations above 1 s are kept to 3 significant digits.
    expect(b.series.at(-1)).toEqual({ minute: START + 60_000, ended: 1, failed: 1, delayP50: 2_350_000, executionP50: 1 });

    // 15 minutes on, minute 0 has left the percentiles but stays in the series.
    clock.advance(14 * 60_000);
    const c = stats.get("ep");
    expect(c.delayMs).toEqual({ p50: 2_350_000, p95: 2_350_000 });
    expect(c.series.filter((m) => m.ended > 0).map((m) => m.minute)).toEqual([START, START + 60_000]);
    // 30 minutes on, the series has forgotten minute 0 too.
    clock.advance(15 * 60_000);
    expect(
      stats
        .get("ep")
        .series.filter((m) => m.ended > 0)
        .map((m) => m.minute),
    ).toEqual([START + 60_000]);
    expect(stats.get("other").jobsPerMinute).toBe(0);

    stats.close();
    events.emit({ type: "ended", job: ended(clock, "COMPLETED", 1, 1) });
    expect(stats.get("ep").jobsPerMinute).toBe(0);
  });

  test("the server's recorder counts jobs that end through the worker protocol and the sweep", async () => {
    const clock = new ManualClock(START);
    await using srv = await startTestServer({ clock });
    const w = protocolWorker(srv, "echo", "w1");
    const [, a] = await srv.json("POST", "/v2/echo/run", { input: {} });
    clock.advance(40);
    await w.take();
    clock.advance(250);
    await w.done(a.id, { output: 1 });
    const [, b] = await srv.json("POST", "/v2/echo/run", { input: {}, policy: { executionTimeout: 6_000 } });
    await w.take();
    clock.advance(6_000);
    await srv.server.sweep();
    const s = srv.server.stats.get("echo");
    expect(s.jobsPerMinute).toBe(2);
    expect(s.delayMs).toEqual({ p50: 0, p95: 40 });
    expect(s.executionMs).toEqual({ p50: 250, p95: 6_000 });
    expect(s.series.at(-1)).toMatchObject({ ended: 2, failed: 1 });
    expect(b.status).toBe("IN_QUEUE");
  });
});
