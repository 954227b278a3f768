import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { spawnSpoolWorker } from "../helpers/spawned.ts";
import { alive, stuckPids } from "../helpers/stuck-pids.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const ROOT = resolve(import.meta.dir, "../..");
const pids = stuckPids();
afterAll(() => pids[Symbol.dispose]());
const helpers = (except: number[]): number[] =>
  pids.live(except).filter((pid) => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep");

test("spool worker: a handler that starts a helper sharing its output and then blocks is TIMED_OUT, its process and helper ended as one by the supervisor, and a new child takes the next job; stopped, the supervisor leaves nothing behind", async () => {
  await using srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100 } });
  const worker = spawnSpoolWorker(join(ROOT, "test/fixtures/helper-fixture.ts"), srv, {
    workerId: "w",
    env: { ...process.env, ...pids.env, SPOOL_KILL_GRACE_MS: "500", SPOOL_TIMEOUT_GRACE_MS: "500", SPOOL_DRAIN_TIMEOUT_MS: "500" },
  });
  try {
    const supervisor = [worker.proc.pid];
    const [, sub] = await srv.json("POST", "/v2/echo/run", { input: { mode: "block" }, policy: { executionTimeout: 6_000 } });
    await until(() => helpers(supervisor).length === 1, "the helper to start", 30_000);
    await until(async () => (await srv.json("GET", `/v2/echo/status/${sub.id}`))[1].status === "TIMED_OUT", "the job to time out", 30_000);
    await worker.waitFor(/terminating its worker process/);
    await until(() => helpers(supervisor).length === 0, "the helper to be ended with its worker", 30_000);
    const [, next] = await srv.json("POST", "/v2/echo/runsync", { input: { mode: "return" } });
    expect(next).toMatchObject({ status: "COMPLETED", workerId: "w-r2" });
    expect(alive(worker.proc.pid)).toBe(true);
  } finally {
    worker.proc.kill("SIGTERM");
    await worker.proc.exited;
  }
  // The supervisor drained its child before it exited: no process of this worker is left.
  await until(() => pids.live().length === 0, "the supervisor's child to be gone");
}, 90_000);
