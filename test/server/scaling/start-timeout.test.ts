import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import { LocalProcessProvider } from "../../../runtime/server/scaling/local-process-provider.ts";
import type { WorkerHandle, WorkerSpec } from "../../../runtime/server/scaling/worker-provider.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../../fixtures/start-fails-fixture.ts");

/** Local worker processes, counted as the scaler starts them. */
class CountingProvider extends LocalProcessProvider {
  readonly handles: WorkerHandle[] = [];
  override start(spec: WorkerSpec): WorkerHandle {
    const handle = super.start(spec);
    this.handles.push(handle);
    return handle;
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("a worker whose setup never ends is ended at startTimeoutMs: its process is gone, it counts as a failed start naming the timeout, and the job waits for the next start", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-start-timeout-"));
  try {
    const clock = new ManualClock(Date.now());
    const provider = new CountingProvider({ killGraceMs: 200 });
    const pidFile = join(dir, "pid");
    await using srv = await startTestServer({
      clock,
      provider,
      server: { scaleIntervalMs: 3_600_000, killGraceMs: 200 },
      endpoints: {
        ep: {
          handler: FIXTURE,
          options: { model: join(dir, "model.onnx"), hang: true, pidFile },
          workersMax: 1,
          startTimeoutMs: 30_000,
          rateLimits: { status: { requests: 1_000_000 } },
        },
      },
    });
    const health = async () => (await srv.json("GET", "/v2/ep/health"))[1];
    const scaler = srv.server.scaler;
    const [, queued] = await srv.json("POST", "/v2/ep/run", { input: {} }); // wakes the scaler: one worker starts

    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8"), "the worker's setup to begin");
    const pid = Number(readFileSync(pidFile, "utf8"));
    clock.advance(29_999);
    await scaler.tick();
    expect((await health()).workers.initializing).toBe(1);

    clock.advance(1);
    await scaler.tick();
    // Being ended, it still holds the endpoint's one place: no second worker meanwhile.
    await scaler.tick();
    expect(provider.handles.length).toBe(1);
    const failed = await until(async () => (await health()).lastStartError, "the failed start");
    expect(failed).toMatchObject({ attempts: 1, permanent: false, refusing: false, onStartFailure: "fail" });
    expect(failed.message).toStartWith("start timed out after 30 s: the worker was not ready, so it was ended");
    expect(alive(pid)).toBe(false);
    expect((await health()).workers).toMatchObject({ initializing: 0, failing: 1 });
    // A timeout may pass: the job waits, and the next start comes after the backoff.
    expect((await srv.json("GET", `/v2/ep/status/${queued.id}`))[1].status).toBe("IN_QUEUE");
    clock.advance(500);
    await scaler.tick();
    expect(provider.handles.length).toBe(2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
