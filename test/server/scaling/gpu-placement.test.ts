import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import { Exposition } from "../../helpers/prometheus.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const GPU = resolve(import.meta.dir, "../../fixtures/gpu-fixture.ts");
/** GPUs seen by each worker process of the endpoint so far, by process (the fixture reports them in its endpoint's folder). */
const seen = (srv: TestServer): { pid: string; cuda: string | null; vulkan: string | null }[] => {
  const dir = join(srv.dataDir, "endpoints", "ep", "gpu-seen");
  return existsSync(dir) ? readdirSync(dir).map((pid) => ({ pid, ...JSON.parse(readFileSync(join(dir, pid), "utf8")) })) : [];
};
const health = async (srv: TestServer) => (await srv.json("GET", "/v2/ep/health"))[1];
const heldMetric = async (srv: TestServer) =>
  new Exposition(await (await srv.call("GET", "/metrics")).text()).value("spool_scale_up_held", { endpoint: "ep", reason: "gpu" });
const submit = async (srv: TestServer) => (await srv.json("POST", "/v2/ep/run", { input: {} }))[1].id as string;

describe("GPU placement with a fake device list", () => {
  test("each worker sees its own GPU, none is double-booked, a scale-up waits for a free one, a freed one is reused", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await startTestServer({
      clock,
      server: { takeWaitMs: 80_000, stopWaitMs: 80_000, scaleIntervalMs: 3_600_000, gpus: ["0", "1"] },
      endpoints: {
        ep: {
          handler: GPU,
          gpusPerWorker: 1,
          workersMax: 3,
          idleTimeout: 1,
          scalerType: "REQUEST_COUNT",
          scalerValue: 1,
          rateLimits: { status: { requests: 1_000_000 } },
        },
      },
    });
    const scaler = srv.server.scaler;
    const ids = [await submit(srv), await submit(srv), await submit(srv)];
    await scaler.tick();
    // Three jobs, workersMax 3, two GPUs: two workers, the third waits.
    expect(scaler.running("ep").length).toBe(2);
    await until(async () => (await health(srv)).jobs.inProgress === 2, "two workers running jobs");
    const first = seen(srv);
    expect(first.map((w) => w.cuda).sort()).toEqual(["0", "1"]);
    // Vulkan numbers cards in its own order: the worker keeps the server's setting (none here).
    expect(first.map((w) => w.vulkan)).toEqual([null, null]);
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(2);

    // Free both GPUs: the queue emptied, the jobs cancelled, the idle workers stopped and gone.
    await srv.json("POST", "/v2/ep/purge-queue");
    for (const id of ids) await srv.json("POST", `/v2/ep/cancel/${id}`);
    await until(async () => (await health(srv)).workers.idle === 2, "two idle workers");
    clock.advance(1_000);
    await scaler.tick();
    await until(async () => (await health(srv)).workers.stopping === undefined && scaler.running("ep").length === 0, "the workers to exit");

    const last = await submit(srv);
    await scaler.tick();
    await until(async () => (await health(srv)).jobs.inProgress === 1, "a new worker running the job");
    const fresh = seen(srv).filter((w) => !first.some((f) => f.pid === w.pid));
    expect(fresh.length).toBe(1);
    expect(["0", "1"]).toContain(fresh[0]!.cuda!);
    await srv.json("POST", `/v2/ep/cancel/${last}`);
  }, 60_000);

  test("small models share a card by memory: two fit, the third is held and /health and the metrics say why; freed memory is reused", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await startTestServer({
      clock,
      server: { takeWaitMs: 80_000, stopWaitMs: 80_000, scaleIntervalMs: 3_600_000, gpus: [{ id: "0", memoryMb: 24_000 }] },
      endpoints: {
        ep: {
          handler: GPU,
          gpuMemoryMb: 10_000,
          options: { device: "cuda" },
          idleTimeout: 1,
          scalerType: "REQUEST_COUNT",
          scalerValue: 1,
          workersMax: 3,
          rateLimits: { status: { requests: 1_000_000 } },
        },
      },
    });
    const scaler = srv.server.scaler;
    const before = new Set(seen(srv).map((w) => w.pid));
    const ids = [await submit(srv), await submit(srv), await submit(srv)];
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(2);
    await until(async () => (await health(srv)).jobs.inProgress === 2, "two workers running jobs");
    expect(
      seen(srv)
        .filter((w) => !before.has(w.pid))
        .map((w) => w.cuda),
    ).toEqual(["0", "0"]);
    const message = "1 worker waits for a free GPU: each needs 1 GPU with 10000 MiB, and none of the 1 GPUs here has room";
    expect((await health(srv)).scaleUpHeld).toEqual({ reason: "gpu", workers: 1, message });
    expect(await heldMetric(srv)).toBe(1);

    // The queue empties and the workers stop: nothing is held, and the memory comes back.
    await srv.json("POST", "/v2/ep/purge-queue");
    for (const id of ids) await srv.json("POST", `/v2/ep/cancel/${id}`);
    await until(async () => (await health(srv)).workers.idle === 2, "two idle workers");
    clock.advance(1_000);
    await scaler.tick();
    expect((await health(srv)).scaleUpHeld).toBeUndefined();
    expect(await heldMetric(srv)).toBe(0);
    await until(async () => (await health(srv)).workers.stopping === undefined && scaler.running("ep").length === 0, "the workers to exit");
    const again = [await submit(srv), await submit(srv)];
    await scaler.tick();
    expect(scaler.running("ep").length).toBe(2);
    expect((await health(srv)).scaleUpHeld).toBeUndefined();
    await until(async () => (await health(srv)).jobs.inProgress === 2, "two new workers running jobs");
    for (const id of again) await srv.json("POST", `/v2/ep/cancel/${id}`);
  }, 60_000);
});
