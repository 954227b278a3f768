import { describe, expect, test } from "bun:test";
import { floorWorkers, targetWorkers, type ScaleInput } from "../../../runtime/server/scaling/scale-decision.ts";
import { SqliteStore } from "../../../runtime/server/store/sqlite/sqlite-store.ts";

type Over = Omit<Partial<ScaleInput>, "config" | "stats"> & {
  config?: Partial<ScaleInput["config"]>;
  stats?: Partial<ScaleInput["stats"]>;
};

const base = (over: Over): ScaleInput => ({
  current: 0,
  initializing: 0,
  now: 100_000,
  ...over,
  config: { workersMin: 0, workersMax: 5, scalerType: "REQUEST_COUNT", scalerValue: 4, ...over.config },
  stats: { queued: 0, inProgress: 0, ...over.stats },
});

describe("REQUEST_COUNT", () => {
  test("target = ceil((inQueue + inProgress) / scalerValue), clamped to min and max", () => {
    const cases: [queued: number, inProgress: number, value: number, min: number, max: number, want: number][] = [
      [0, 0, 4, 0, 5, 0],
      [1, 0, 4, 0, 5, 1],
      [4, 0, 4, 0, 5, 1],
      [5, 0, 4, 0, 5, 2],
      [3, 2, 4, 0, 5, 2],
      [8, 0, 4, 0, 5, 2],
      [9, 0, 4, 0, 5, 3],
      [100, 0, 4, 0, 5, 5],
      [0, 0, 4, 2, 5, 2],
      [7, 0, 1, 0, 3, 3],
      [0, 3, 1, 0, 3, 3],
    ];
    for (const [queued, inProgress, scalerValue, workersMin, workersMax, want] of cases) {
      const input = base({ stats: { queued, inProgress }, config: { scalerValue, workersMin, workersMax } });
      expect({ queued, inProgress, scalerValue, workersMin, workersMax, got: targetWorkers(input) }).toEqual({
        queued,
        inProgress,
        scalerValue,
        workersMin,
        workersMax,
        got: want,
      });
    }
  });

  test("its floor follows the target, so idle workers it still wants are kept", () => {
    expect(floorWorkers(base({ stats: { queued: 0, inProgress: 5 }, current: 3 }))).toBe(2);
    expect(floorWorkers(base({ stats: { queued: 0, inProgress: 0 }, current: 3, config: { workersMin: 1 } }))).toBe(1);
  });
});

describe("QUEUE_DELAY", () => {
  const qd = (over: Over) => base({ ...over, config: { scalerType: "QUEUE_DELAY", scalerValue: 4, ...over.config } });

  test("adds a worker once the oldest job has waited scalerValue seconds, not before", () => {
    const now = 100_000;
    expect(targetWorkers(qd({ current: 1, now, stats: { queued: 1, inProgress: 1, oldestQueuedAt: now - 3_999 } }))).toBe(1);
    expect(targetWorkers(qd({ current: 1, now, stats: { queued: 1, inProgress: 1, oldestQueuedAt: now - 4_000 } }))).toBe(2);
  });

  test("starts one at once from zero, never while one is still starting, never past max", () => {
    const now = 100_000;
    expect(targetWorkers(qd({ current: 0, now, stats: { queued: 3, inProgress: 0, oldestQueuedAt: now } }))).toBe(1);
    expect(targetWorkers(qd({ current: 1, initializing: 1, now, stats: { queued: 3, inProgress: 0, oldestQueuedAt: now - 60_000 } }))).toBe(
      1,
    );
    expect(targetWorkers(qd({ current: 5, now, stats: { queued: 3, inProgress: 5, oldestQueuedAt: now - 60_000 } }))).toBe(5);
  });

  test("keeps what it has with an empty queue; scale-down is left to idleTimeout", () => {
    expect(targetWorkers(qd({ current: 3, stats: { queued: 0, inProgress: 0 } }))).toBe(3);
    expect(floorWorkers(qd({ current: 3, stats: { queued: 0, inProgress: 0 }, config: { workersMin: 1 } }))).toBe(1);
  });

  test("an endpoint with only lowPriority jobs queued stays at zero; one normal job starts a worker", async () => {
    const store = SqliteStore.open(":memory:", { retention: { syncMs: 60_000, asyncMs: 60_000 } });
    try {
      const now = 100_000;
      const job = (id: string, lowPriority: boolean) => ({
        id,
        endpointId: "ep",
        input: {},
        sync: false,
        policy: { executionTimeout: 60_000, ttl: 86_400_000, lowPriority },
      });
      for (const id of ["a", "b", "c"]) await store.enqueue(job(id, true), now);
      const low = await store.scalingStats("ep", now + 60_000, 60_000);
      expect(low.queuedLowPriority).toBe(3);
      expect(targetWorkers(qd({ current: 0, now: now + 60_000, stats: low }))).toBe(0);
      await store.enqueue(job("d", false), now + 60_000);
      expect(targetWorkers(qd({ current: 0, now: now + 60_000, stats: await store.scalingStats("ep", now + 60_000, 60_000) }))).toBe(1);
    } finally {
      await store.close();
    }
  });
});
