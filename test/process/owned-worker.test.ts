import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { silentLog } from "../../runtime/log.ts";
import { OwnedWorker, PENDING_STOP_MS, type StopSource } from "../../runtime/process/owned-worker.ts";
import { alive } from "../helpers/stuck-pids.ts";
import { until } from "../helpers/until.ts";

const FIXTURE = join(import.meta.dir, "../fixtures/owned-child-fixture.ts");
const KILL_GRACE_MS = 500;
const DRAIN_MS = 35_000;
/** The fixture's grace for the jobs it reports. */
const JOB_GRACE_MS = 1_000;
const STOP_LINE = (id: string) => JSON.stringify({ type: "stop", jobIds: [id] });

/** A stop list the test hands out: the first wait answers `release`'s ids, later ones wait until the process is gone. */
function testStops() {
  const first = Promise.withResolvers<string[]>();
  let asked: string | undefined;
  let calls = 0;
  const stopsFor = (workerId: string): StopSource => {
    asked = workerId;
    return async (signal) => {
      if (calls++ === 0) return first.promise;
      await new Promise((r) => signal.addEventListener("abort", r));
      return [];
    };
  };
  return { stopsFor, release: first.resolve, asked: () => asked };
}

/** The fixture process, owned on a manual clock; its output collected. */
async function ownedChild(stopsFor?: (workerId: string) => StopSource) {
  const clock = new ManualClock();
  const t0 = clock.now();
  const proc = Bun.spawn([process.execPath, FIXTURE], {
    stdio: ["pipe", "pipe", "inherit", "pipe"],
    env: { ...process.env, CHILD_DRAIN_MS: String(DRAIN_MS) },
  });
  let out = "";
  const decoder = new TextDecoder();
  void (async () => {
    for await (const bytes of proc.stdout) out += decoder.decode(bytes, { stream: true });
  })();
  const owned = new OwnedWorker(proc, { killGraceMs: KILL_GRACE_MS, log: silentLog, clock, stopsFor });
  await until(() => owned.workerId, "the worker's hello", 30_000);
  return {
    clock,
    t0,
    proc,
    owned,
    out: () => out,
    count: (line: string) => out.split("\n").filter((l) => l === line).length,
    /** Has the fixture report a job started, and waits until its owner knows. */
    async start(jobId: string, running: number) {
      proc.stdin.write(`${JSON.stringify({ start: jobId })}\n`);
      proc.stdin.flush();
      await until(() => owned.watchdog.running === running, `job ${jobId} reported started`);
    },
    async [Symbol.asyncDispose]() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}

const sigtermSeen = (c: { out: () => string }) => until(() => c.out().includes("SIGTERM ignored"), "SIGTERM to reach the process");

describe("the owner of a worker process", () => {
  test("a stop of a worker running no job: SIGTERM, then SIGKILL after the kill grace, with no drain", async () => {
    await using c = await ownedChild();
    c.owned.stop();
    await sigtermSeen(c);
    expect(c.clock.dueTimes).toEqual([c.t0 + KILL_GRACE_MS]);
    c.clock.advance(KILL_GRACE_MS);
    await c.proc.exited;
    expect(c.proc.signalCode).toBe("SIGKILL");
  }, 30_000);

  test("a stop of a worker running a job: the kill waits for the worker's drain, then the kill grace", async () => {
    await using c = await ownedChild();
    await c.start("a", 1);
    c.owned.stop();
    await sigtermSeen(c);
    c.clock.advance(KILL_GRACE_MS);
    const killAt = c.t0 + KILL_GRACE_MS + DRAIN_MS;
    await until(() => c.clock.dueTimes.includes(killAt), "the kill to wait for the drain");
    expect(alive(c.proc.pid)).toBe(true);
    c.clock.advance(DRAIN_MS);
    await c.proc.exited;
    expect(c.proc.signalCode).toBe("SIGKILL");
  }, 30_000);

  test("a cancel is taken for the worker's id, passed to the process, and ends it when the job does not end within its grace", async () => {
    const stops = testStops();
    await using c = await ownedChild(stops.stopsFor);
    expect(stops.asked()).toBe("child-1");
    await c.start("a", 1);
    expect(c.owned.watchdog.overdue).toBe(false);
    stops.release(["a"]);
    await until(() => c.count(STOP_LINE("a")) === 1, "the stop to reach the process");
    // The job is over on the server: its process is no longer a worker to count idle.
    expect(c.owned.watchdog.overdue).toBe(true);
    await until(() => c.clock.dueTimes.includes(c.t0 + JOB_GRACE_MS), "the job's grace to start");
    c.clock.advance(JOB_GRACE_MS);
    await sigtermSeen(c);
    c.clock.advance(KILL_GRACE_MS);
    await c.proc.exited;
    expect(c.proc.signalCode).toBe("SIGKILL");
    expect(c.owned.watchdog.fired).toBe(true);
  }, 30_000);

  test("a cancel that overtakes its job's start is passed again, and its grace starts, once the job starts", async () => {
    const stops = testStops();
    await using c = await ownedChild(stops.stopsFor);
    stops.release(["b"]);
    await until(() => c.count(STOP_LINE("b")) === 1, "the stop to reach the process");
    expect(c.owned.watchdog.overdue).toBe(false);
    // It holds a cancelled job it has not reported yet: ending, not idle.
    expect(c.owned.stopsPending).toBe(true);
    await c.start("b", 1);
    await until(() => c.count(STOP_LINE("b")) === 2, "the stop to be passed again");
    expect(c.owned.watchdog.overdue).toBe(true);
    expect(c.owned.stopsPending).toBe(false);
    await until(() => c.clock.dueTimes.includes(c.t0 + JOB_GRACE_MS), "the job's grace to start");
    c.clock.advance(JOB_GRACE_MS);
    await sigtermSeen(c);
  }, 30_000);

  test("a hello naming a worker id the owner did not give is not believed: no stop list is taken for it, and the process, which nobody could cancel, is ended", async () => {
    const stops = testStops();
    const proc = Bun.spawn([process.execPath, FIXTURE], { stdio: ["pipe", "ignore", "inherit", "pipe"] });
    const owned = new OwnedWorker(proc, {
      killGraceMs: KILL_GRACE_MS,
      log: silentLog,
      clock: new ManualClock(),
      stopsFor: stops.stopsFor,
      workerId: "given-1",
    });
    try {
      // The fixture says hello as child-1: it is ended at once (no grace), never relayed a stop.
      await proc.exited;
      expect(proc.signalCode).toBe("SIGKILL");
      expect([owned.workerId, stops.asked()]).toEqual([undefined, undefined]);
    } finally {
      proc.kill("SIGKILL");
    }
  });

  test("a stop that comes for a job the process already reported ended is nothing to wait for: the process is not ending", async () => {
    const stops = testStops();
    await using c = await ownedChild(stops.stopsFor);
    await c.start("d", 1);
    c.proc.stdin.write(`${JSON.stringify({ end: "d" })}\n`);
    c.proc.stdin.flush();
    await until(() => c.owned.watchdog.running === 0, "job d reported ended");
    stops.release(["d"]);
    await until(() => c.count(STOP_LINE("d")) === 1, "the late stop to reach the process");
    expect([c.owned.stopsPending, c.owned.watchdog.overdue]).toEqual([false, false]);
  }, 30_000);

  test("a stop for a job the process has not started within 30 s is forgotten: a later start of that job (a retry handed to it again) is not cancelled", async () => {
    const stops = testStops();
    await using c = await ownedChild(stops.stopsFor);
    stops.release(["b"]);
    await until(() => c.count(STOP_LINE("b")) === 1, "the stop to reach the process");
    c.clock.advance(PENDING_STOP_MS + 1);
    expect(c.owned.stopsPending).toBe(false);
    await c.start("b", 1);
    expect(c.count(STOP_LINE("b"))).toBe(1);
    expect(c.owned.watchdog.overdue).toBe(false);
  }, 30_000);
});
