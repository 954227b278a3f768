import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import type { ConfigInput } from "../../../runtime/config/config.ts";
import { detectGpus } from "../../../runtime/config/gpus.ts";
import { fakeNvidiaSmi, MIXED_CARDS } from "../../helpers/fake-nvidia-smi.ts";
import { RecordingProvider } from "../../helpers/recording-provider.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const HANDLER = resolve(import.meta.dir, "../../fixtures/gpu-fixture.ts");
const [C0, C1, C2] = [
  "GPU-c3a9e0f1-0000-4000-8000-000000000003",
  "GPU-1b7d2c44-0000-4000-8000-000000000001",
  "GPU-8e5f6a10-0000-4000-8000-000000000002",
];
type Endpoints = NonNullable<ConfigInput["endpoints"]>;
const fixed = (workers: number, more: Endpoints[string] = {}): Endpoints[string] => ({
  handler: HANDLER,
  gpusPerWorker: 1,
  workersMin: workers,
  workersMax: workers,
  ...more,
});

/** A server whose GPUs come from the fake nvidia-smi, whose scaler ticks only when the test says. */
function serve(provider: RecordingProvider, endpoints: Endpoints, server: NonNullable<ConfigInput["server"]> = {}) {
  const smi = fakeNvidiaSmi(MIXED_CARDS);
  const srv = startTestServer({
    clock: new ManualClock(Date.now()),
    provider,
    endpoints,
    server: { scaleIntervalMs: 3_600_000, ...server },
    detectGpus: () => detectGpus({ PATH: smi.path }),
  });
  return srv.finally(() => smi[Symbol.dispose]());
}
const health = async (srv: TestServer, ep = "ep") => (await srv.json("GET", `/v2/${ep}/health`))[1];

describe("GPUs named by UUID", () => {
  test("mixed cards: each worker is handed its card's UUID (CUDA's own order cannot move it), by memory where models share", async () => {
    const provider = new RecordingProvider();
    await using srv = await serve(provider, { big: fixed(1), small: fixed(2, { gpuMemoryMb: 30_000 }) });
    // big takes the first whole card (index 0); the 30 GB workers fit only the 80 and 40 GB cards, the fuller first.
    expect(provider.started.map((w) => [w.spec.endpointId, w.spec.env.CUDA_VISIBLE_DEVICES, w.spec.env.CUDA_DEVICE_ORDER])).toEqual([
      ["big", C0, "PCI_BUS_ID"],
      ["small", C2, "PCI_BUS_ID"],
      ["small", C1, "PCI_BUS_ID"],
    ]);
    expect(srv.server.scaler.running("small").length).toBe(2);
  });

  test("server.gpus naming a card by index hands out that card's UUID", async () => {
    const provider = new RecordingProvider();
    await using _srv = await serve(provider, { ep: fixed(1) }, { gpus: ["2"] });
    expect(provider.liveGpus()).toEqual([C2]);
  });

  test("a provider whose start throws gives its card back: the next tick places a worker on it", async () => {
    const provider = new RecordingProvider();
    provider.throwOnStart = 1; // the start at server start-up
    await using srv = await serve(provider, { ep: fixed(1) }, { gpus: ["0"] });
    expect(provider.started).toEqual([]);
    await srv.server.scaler.tick();
    expect(provider.liveGpus()).toEqual([C0]);
    expect((await health(srv)).scaleUpHeld).toBeUndefined();
  });
});

describe("two servers on one host", () => {
  test("never hand out the same card: the second waits for want of a GPU until the first's workers have exited, however long their ending takes", async () => {
    const lockDir = mkdtempSync(join(tmpdir(), "spool-gpu-lockdir-"));
    const first = new RecordingProvider({ stubborn: true });
    const second = new RecordingProvider();
    const a = await serve(first, { ep: fixed(2) }, { gpuLockDir: lockDir });
    let aStopped: Promise<void> | undefined;
    try {
      await using b = await serve(second, { ep: fixed(2) }, { gpuLockDir: lockDir });
      expect(first.liveGpus()).toEqual([C0, C1]);
      expect(second.liveGpus()).toEqual([C2]);
      const message =
        "1 worker waits for a free GPU: each needs 1 GPU, and none of the 3 GPUs here has room (2 in use by another server on this host)";
      expect((await health(b)).scaleUpHeld).toEqual({ reason: "gpu", workers: 1, message });

      // The first server stops; its workers are asked to end but have not exited: their cards stay its own.
      aStopped = a.server.stop();
      await until(() => first.started.every((w) => w.stopAsked), "the first server to ask its workers to stop");
      await b.server.scaler.tick();
      expect(second.liveGpus()).toEqual([C2]);

      first.started[1]!.exit(137);
      await b.server.scaler.tick();
      expect(second.liveGpus()).toEqual([C2, C1]);
      expect((await health(b)).scaleUpHeld).toBeUndefined();
      first.started[0]!.exit(137);
      await aStopped;
    } finally {
      for (const w of first.started) w.exit(137);
      await (aStopped ?? a.server.stop());
      await a.store.close();
      rmSync(a.dataDir, { recursive: true, force: true });
      rmSync(lockDir, { recursive: true, force: true });
    }
  });
});
