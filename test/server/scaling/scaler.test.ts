import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import type { ConfigInput } from "../../../runtime/config/config.ts";
import { GatedProvider } from "../../helpers/gated-provider.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const HOLD = resolve(import.meta.dir, "../../fixtures/hold-fixture.ts");

/**
 * Real worker processes on a manual clock. The scaler decides when a test calls tick(), and also
 * on its own when a job is queued (a queue event wakes its loop), so a submit can start a worker
 * before the test's tick does.
 */
async function scaledServer(clock: ManualClock, endpoint: NonNullable<ConfigInput["endpoints"]>[string], provider = new GatedProvider()) {
  return startTestServer({
    clock,
    provider,
    server: { takeWaitMs: 80_000, stopWaitMs: 80_000, scaleIntervalMs: 3_600_000 },
    // The tests poll job status while worker processes start, and the manual clock never moves
    // the rate-limit window on: a limit of the specification's 2000 per window could run out.
    endpoints: { ep: { handler: HOLD, idleTimeout: 1, rateLimits: { status: { requests: 1_000_000 } }, ...endpoint } },
  });
}
const health = async (srv: TestServer) => (await srv.json("GET", "/v2/ep/health"))[1];
const submit = async (srv: TestServer, input: unknown, policy?: unknown) =>
  (await srv.json("POST", "/v2/ep/run", { input, ...(policy ? { policy } : {}) }))[1].id as string;
const status = async (srv: TestServer, id: string) => (await srv.json("GET", `/v2/ep/status/${id}`))[1];

describe("scaler with local worker processes", () => {
  test("a burst scales up to workersMax and never beyond, then back to zero after idleTimeout", async () => {
    const clock = new ManualClock(Date.now());
    // Worker processes start only when the gate opens: until then the started workers are
    // initializing for sure, however fast they would otherwise reach the server.
    const gate = new GatedProvider({ closed: true });
    await using srv = await scaledServer(clock, { workersMax: 3, scalerType: "REQUEST_COUNT", scalerValue: 1 }, gate);
    const scaler = srv.server.scaler;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await submit(srv, { hold: true }));

    await scaler.tick();
    expect(scaler.running("ep").length).toBe(3);
    expect((await health(srv)).workers.initializing).toBe(3);
    // Each worker holds a key of its own, kept in the server's memory: none is stored.
    expect(srv.server.workerKeys.size).toBe(3);
    expect((await srv.store.listKeys()).map((k) => k.name)).toEqual(["test"]);
    gate.open();
    await until(async () => (await health(srv)).jobs.inProgress === 3, "3 workers running jobs");
    expect((await health(srv)).workers).toEqual({ idle: 0, running: 3, initializing: 0, unhealthy: 0 });
    for (let i = 0; i < 3; i++) await scaler.tick();
    expect(scaler.running("ep").length).toBe(3);

    await srv.json("POST", "/v2/ep/purge-queue");
    for (const id of ids) await srv.json("POST", `/v2/ep/cancel/${id}`);
    await until(async () => (await health(srv)).workers.idle === 3, "3 idle workers");

    clock.advance(999);
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(3);
    clock.advance(1);
    await scaler.tick();
    expect(scaler.running("ep")).toEqual([]);
    // Until their processes exit they are stopping, never idle.
    expect((await health(srv)).workers.idle).toBe(0);
    await until(async () => (await health(srv)).workers.stopping === undefined, "the workers to exit");
    expect((await health(srv)).workers).toEqual({ idle: 0, running: 0, initializing: 0, unhealthy: 0 });
    // Their keys ended with them.
    expect(srv.server.workerKeys.size).toBe(0);
  });

  test("lowPriority jobs never cause a scale-up; a normal job does, and the worker runs both", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await scaledServer(clock, { workersMax: 2, scalerType: "QUEUE_DELAY", scalerValue: 1 });
    const scaler = srv.server.scaler;
    const low = await submit(srv, {}, { lowPriority: true });
    await scaler.tick();
    clock.advance(10_000);
    await scaler.tick();
    expect(scaler.running("ep")).toEqual([]);
    expect((await health(srv)).workers.initializing).toBe(0);

    const normal = await submit(srv, {});
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(1);
    await until(
      async () => (await status(srv, low)).status === "COMPLETED" && (await status(srv, normal)).status === "COMPLETED",
      "both jobs",
    );
  });

  test("QUEUE_DELAY adds a worker when a job has waited scalerValue seconds", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await scaledServer(clock, { workersMax: 2, scalerType: "QUEUE_DELAY", scalerValue: 4 });
    const scaler = srv.server.scaler;
    const first = await submit(srv, { hold: true });
    await scaler.tick(); // from zero: one at once
    expect(scaler.running("ep").length).toBe(1);
    await until(async () => (await status(srv, first)).status === "IN_PROGRESS", "the first job to start");

    const second = await submit(srv, { hold: true });
    clock.advance(3_999);
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(1);
    clock.advance(1);
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(2);
    await until(async () => (await status(srv, second)).status === "IN_PROGRESS", "the second job to start");
    for (const id of [first, second]) await srv.json("POST", `/v2/ep/cancel/${id}`);
  });

  test("a crashed worker is replaced after backoff and its job, re-queued, completes on the new one", async () => {
    const clock = new ManualClock(Date.now());
    const dir = mkdtempSync(join(tmpdir(), "spool-crash-"));
    try {
      await using srv = await scaledServer(clock, { workersMax: 1 });
      const scaler = srv.server.scaler;
      const marker = join(dir, "crashed");
      const id = await submit(srv, { crashOnce: marker });
      await scaler.tick();
      const [first] = scaler.running("ep");
      await until(() => scaler.running("ep").length === 0, "the worker to crash");
      expect(readFileSync(marker, "utf8")).toBe(first!);

      await srv.server.sweep(); // the lost worker's job is re-queued once
      expect((await status(srv, id)).status).toBe("IN_QUEUE");
      await scaler.tick();
      expect(scaler.running("ep")).toEqual([]); // backoff
      clock.advance(500);
      await scaler.tick();
      expect(scaler.running("ep").length).toBe(1);
      const done = await until(async () => {
        const s = await status(srv, id);
        return s.status === "COMPLETED" && s;
      }, "the job to complete on the new worker");
      expect(done.output.workerId).not.toBe(first);
      expect(done.workerId).toBe(scaler.running("ep")[0]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
