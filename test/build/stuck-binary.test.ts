import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { spawnProcess } from "../helpers/spawned.ts";
import { alive, stuckPids } from "../helpers/stuck-pids.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { buildHandler, flags, ROOT } from "./built-binary.ts";

const built = buildHandler(join(ROOT, "test/fixtures/stuck-fixture.ts"));
const pids = stuckPids();
afterAll(() => {
  built[Symbol.dispose]();
  pids[Symbol.dispose]();
});

const status = async (srv: TestServer, id: string): Promise<string> => (await srv.json("GET", `/v2/echo/status/${id}`))[1].status;

describe("a built binary's own supervisor", () => {
  test("ends the process of a blocked handler past its deadline (TIMED_OUT) and after a cancel (CANCELLED), and replaces it each time", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100 } });
    await using worker = spawnProcess([built.binary, ...flags(srv, "echo"), "--worker-id", "w"], {
      env: { ...process.env, STUCK_PIDS_DIR: pids.dir, SPOOL_KILL_GRACE_MS: "500", SPOOL_TIMEOUT_GRACE_MS: "500" },
    });
    /** Submits a blocked job and returns it with the pid of the process that runs it (the supervisor loads the handler too). */
    const blockedJob = async (executionTimeout: number): Promise<[string, number]> => {
      const [, sub] = await srv.json("POST", "/v2/echo/run", { input: { mode: "blocked" }, policy: { executionTimeout } });
      await until(async () => (await status(srv, sub.id)) === "IN_PROGRESS", "the blocked job to start", 30_000);
      const [pid] = pids.live([worker.proc.pid]);
      expect(pid).toBeDefined();
      return [sub.id, pid!];
    };

    const [timedOut, first] = await blockedJob(6_000);
    await worker.waitFor(/ran past its timeout and did not end within its grace; terminating its worker process/);
    await until(() => !alive(first), "the first blocked process to end", 30_000);
    expect(await status(srv, timedOut)).toBe("TIMED_OUT");

    // A deadline far away: only the cancel ends this one.
    const [cancelled, second] = await blockedJob(600_000);
    expect(second).not.toBe(first);
    expect(await srv.json("POST", `/v2/echo/cancel/${cancelled}`)).toEqual([200, { id: cancelled, status: "CANCELLED" }]);
    await worker.waitFor(/was cancelled and did not end within its grace; terminating its worker process/);
    await until(() => !alive(second), "the second blocked process to end", 30_000);
    expect(await status(srv, cancelled)).toBe("CANCELLED");

    const [, next] = await srv.json("POST", "/v2/echo/runsync", { input: { mode: "quick" } });
    expect(next).toMatchObject({ status: "COMPLETED", workerId: "w-r3" });
    expect(pids.live([worker.proc.pid])).toEqual([next.output.pid]);
  }, 120_000);
});
