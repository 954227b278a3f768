import { afterAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { stuckPids, watchUntilGone } from "../../helpers/stuck-pids.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const STUCK = resolve(import.meta.dir, "../../fixtures/stuck-fixture.ts");
const pids = stuckPids();
afterAll(() => pids[Symbol.dispose]());

// The server imports the handler too (input schemas): its own pid is not a worker.
const livePids = (): number[] => pids.live([process.pid]);

/** The deadline (6 s) and the worker's own grace (5 s) are the defaults a user gets; the kill grace is short. */
async function stuckServer(): Promise<TestServer> {
  return startTestServer({
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100, scaleIntervalMs: 100, killGraceMs: 500 },
    // The test reads status at every turn: far more than the specification's window allows.
    endpoints: {
      ep: {
        handler: STUCK,
        env: pids.env,
        workersMax: 1,
        idleTimeout: 1,
        rateLimits: { status: { requests: 1_000_000 }, runsync: { requests: 1_000_000 } },
      },
    },
  });
}

describe("a handler that never yields, on a worker the scaler started", () => {
  for (const mode of ["busy", "blocked"] as const) {
    test(`${mode}: TIMED_OUT, its process ended from outside, never shown idle, never a second process beside it`, async () => {
      await using srv = await stuckServer();
      const [, sub] = await srv.json("POST", "/v2/ep/run", { input: { mode }, policy: { executionTimeout: 6_000 } });
      const stuckPid = await until(() => livePids()[0], "the worker process to start");
      // Watch until the stuck process is gone: the job's status, health and the process count at every turn.
      const { maxAlive, shown: states } = await watchUntilGone(
        srv,
        "ep",
        stuckPid,
        livePids,
        async () => `${(await srv.json("GET", `/v2/ep/status/${sub.id}`))[1].status}:`,
      );
      expect(maxAlive).toBe(1);
      // Past its deadline the job is final, and its worker is stopping, never idle.
      expect([...states].filter((s) => s.startsWith("TIMED_OUT"))).not.toContain("TIMED_OUT:idle");
      expect(states).toContain("TIMED_OUT:stopping");
      const [, final] = await srv.json("GET", `/v2/ep/status/${sub.id}`);
      expect(final.status).toBe("TIMED_OUT");

      // A replacement takes the next job; still one process at a time.
      const [, next] = await srv.json("POST", "/v2/ep/runsync", { input: { mode: "quick" } });
      expect(next.status).toBe("COMPLETED");
      const replacement = livePids();
      expect(replacement).toHaveLength(1);
      expect(replacement).not.toContain(stuckPid);
    }, 90_000);
  }
});
