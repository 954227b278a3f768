import { afterAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { stuckPids, watchUntilGone, type StuckWatch } from "../../helpers/stuck-pids.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const STUCK = resolve(import.meta.dir, "../../fixtures/stuck-fixture.ts");
const pids = stuckPids();
// The endpoint's workers are found by their environment, take two jobs at a time, and have a
// short grace after a cancel.
const env = { ...pids.env, STUCK_CONCURRENCY: "2", SPOOL_TIMEOUT_GRACE_MS: "500" };
afterAll(() => pids[Symbol.dispose]());

// The server imports the handler too (input schemas): its own pid is not a worker.
const livePids = (): number[] => pids.live([process.pid]);
// A deadline far away: only a cancel can end a blocked job.
const policy = { executionTimeout: 600_000 };

function stuckServer(): Promise<TestServer> {
  return startTestServer({
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100, scaleIntervalMs: 100, killGraceMs: 500 },
    endpoints: {
      ep: {
        handler: STUCK,
        env,
        workersMax: 1,
        idleTimeout: 1,
        rateLimits: { status: { requests: 1_000_000 }, runsync: { requests: 1_000_000 } },
      },
    },
  });
}

const status = async (srv: TestServer, id: string): Promise<string> => (await srv.json("GET", `/v2/ep/status/${id}`))[1].status;

/** Cancels the job and watches until `pid` is gone. */
async function cancelAndWatch(srv: TestServer, jobId: string, pid: number): Promise<StuckWatch> {
  expect(await srv.json("POST", `/v2/ep/cancel/${jobId}`)).toEqual([200, { id: jobId, status: "CANCELLED" }]);
  return watchUntilGone(srv, "ep", pid, livePids);
}

describe("a cancelled job whose handler never yields, on a worker the scaler started", () => {
  test("CANCELLED, its process ended from outside after the grace, never shown idle meanwhile, never a second process beside it", async () => {
    await using srv = await stuckServer();
    const [, blocked] = await srv.json("POST", "/v2/ep/run", { input: { mode: "blocked" }, policy });
    await until(async () => (await status(srv, blocked.id)) === "IN_PROGRESS", "the job to start", 30_000);
    const [stuckPid] = livePids();
    expect(stuckPid).toBeDefined();

    const { maxAlive, shown } = await cancelAndWatch(srv, blocked.id, stuckPid!);
    expect(maxAlive).toBe(1);
    // The cancelled job no longer counts as running, yet its process is not idle: it is stopping.
    expect(shown).not.toContain("idle");
    expect(shown).toContain("stopping");
    expect(await status(srv, blocked.id)).toBe("CANCELLED");

    const [, next] = await srv.json("POST", "/v2/ep/runsync", { input: { mode: "quick" } });
    expect(next.status).toBe("COMPLETED");
    const replacement = livePids();
    expect(replacement).toHaveLength(1);
    expect(replacement).not.toContain(stuckPid);
  }, 90_000);

  test("the other job the process held is re-queued once and run by a replacement; the cancelled one stays CANCELLED", async () => {
    await using srv = await stuckServer();
    const [, blocked] = await srv.json("POST", "/v2/ep/run", { input: { mode: "blocked" }, policy });
    const [, quick] = await srv.json("POST", "/v2/ep/run", { input: { mode: "quick" }, policy });
    // Both go to the first worker in one take (the process boots after both were queued).
    await until(
      async () => (await status(srv, blocked.id)) === "IN_PROGRESS" && (await status(srv, quick.id)) === "IN_PROGRESS",
      "both jobs to start",
      30_000,
    );
    const [stuckPid] = livePids();

    const { maxAlive } = await cancelAndWatch(srv, blocked.id, stuckPid!);
    expect(maxAlive).toBe(1);
    // The quick job's result was never posted from the blocked process: it follows the
    // worker-loss rule, and a replacement runs it.
    const done = await until(
      async () => {
        const [, s] = await srv.json("GET", `/v2/ep/status/${quick.id}`);
        return s.status === "COMPLETED" && s;
      },
      "the held-up job to complete on a replacement",
      30_000,
    );
    expect(done.output.pid).toBeNumber();
    expect(livePids()).not.toContain(stuckPid!);
    expect((await srv.store.get("ep", quick.id, Date.now()))?.losses).toBe(1);
    expect(await status(srv, blocked.id)).toBe("CANCELLED");
  }, 90_000);
});
