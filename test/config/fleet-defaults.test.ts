import { describe, expect, test } from "bun:test";
import { ConfigError, loadConfig, parseConfig, type ConfigInput } from "../../runtime/config/config.ts";
import { detectGpus, gpuCapacity, parseNvidiaSmi, type GpuDevice } from "../../runtime/config/gpus.ts";
import { fakeNvidiaSmi, MIXED_CARDS } from "../helpers/fake-nvidia-smi.ts";

// What `nvidia-smi --query-gpu=uuid,index,memory.total --format=csv,noheader,nounits` prints on a
// host with two 80 GB cards.
const A = "GPU-5d0c1e2f-3a4b-5c6d-7e8f-90a1b2c3d4e5";
const B = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const TWO_H100 = `${A}, 0, 81559\n${B}, 1, 81559\n`;
const H = "handlers/image/fast.ts";

/** parseConfig with a fake device list, recording whether it was asked for. */
function load(raw: ConfigInput, devices: GpuDevice[] = parseNvidiaSmi(TWO_H100)) {
  let detected = 0;
  const config = parseConfig(raw, "spool.toml", { detectGpus: () => (detected++, devices) });
  return { config, detected };
}

describe("GPUs at config load", () => {
  test("nvidia-smi's answer becomes devices named by UUID, with their index and memory; lines that do not parse are skipped", () => {
    expect(parseNvidiaSmi(TWO_H100)).toEqual([
      { id: A, index: "0", memoryMb: 81559 },
      { id: B, index: "1", memoryMb: 81559 },
    ]);
    expect(parseNvidiaSmi(`${A}, 0, [N/A]\n\nNVIDIA-SMI has failed, x\n0, 81559\n${B},2,24576`)).toEqual([
      { id: A, index: "0" },
      { id: B, index: "2", memoryMb: 24576 },
    ]);
  });

  test("the query runs nvidia-smi from the PATH it is given: mixed cards keep their own UUID and memory, in index order", () => {
    using smi = fakeNvidiaSmi(MIXED_CARDS);
    expect(detectGpus({ PATH: smi.path })).toEqual([
      { id: "GPU-c3a9e0f1-0000-4000-8000-000000000003", index: "0", memoryMb: 24576 },
      { id: "GPU-1b7d2c44-0000-4000-8000-000000000001", index: "1", memoryMb: 81559 },
      { id: "GPU-8e5f6a10-0000-4000-8000-000000000002", index: "2", memoryMb: 40960 },
    ]);
    expect(detectGpus({ PATH: "/nonexistent" })).toEqual([]);
  });

  test("server.gpus takes UUIDs and { id, memoryMb } objects without asking the machine", () => {
    const { config, detected } = load({
      server: { gpus: [A, { id: "GPU-1f2e", memoryMb: 24576 }] },
      endpoints: { img: { handler: H, options: { device: "cuda" } } },
    });
    expect(config.server.gpus).toEqual([{ id: A }, { id: "GPU-1f2e", memoryMb: 24576 }]);
    expect(detected).toBe(0);
    expect(() => parseConfig({ server: { gpus: [{ id: "0", memoryMb: 0 }] } }, "spool.toml")).toThrow("spool.toml: server.gpus.0");
  });

  test("a card that server.gpus names by index is handed out by the UUID the machine gives it; its memory stays as configured, and an index the machine lacks stays as written", () => {
    const { config, detected } = load({
      server: { gpus: [{ id: "1", memoryMb: 40_000 }, "7"] },
      endpoints: { img: { handler: H, options: { device: "cuda" } } },
    });
    expect(config.server.gpus).toEqual([{ id: B, index: "1", memoryMb: 40_000 }, { id: "7" }]);
    expect(detected).toBe(1);
  });

  test("the machine's GPUs are looked up only when an endpoint whose workers this server starts needs them", () => {
    expect(
      load({
        endpoints: {
          img: { handler: H, options: { device: "cpu" } },
          ext: { handler: H, provider: "external", options: { device: "cuda" } },
        },
      }),
    ).toMatchObject({ detected: 0, config: { server: { gpus: [] } } });
    expect(load({ endpoints: { img: { handler: H, options: { device: "cuda" } } } })).toMatchObject({
      detected: 1,
      config: { server: { gpus: parseNvidiaSmi(TWO_H100) } },
    });
  });

  test("default workersMax: 3, or for a model endpoint as many workers as the GPUs hold (1 on a CPU host or device); a setting wins", () => {
    const endpoints = {
      echo: { handler: "handlers/examples/echo.ts" },
      cpu: { handler: H, options: { device: "cpu" } },
      cuda: { handler: H, options: { device: "cuda" } },
      pairs: { handler: H, gpusPerWorker: 2, options: { device: "cuda" } },
      small: { handler: H, gpuMemoryMb: 20_000, options: { device: "cuda" } },
      set: { handler: H, workersMax: 7, options: { device: "cuda" } },
      ext: { handler: H, provider: "external" as const, options: { device: "cuda" } },
    };
    const max = (devices?: GpuDevice[]) =>
      Object.fromEntries(Object.entries(load({ endpoints }, devices).config.endpoints).map(([id, ep]) => [id, ep.workersMax]));
    expect(max()).toEqual({ echo: 3, cpu: 1, cuda: 2, pairs: 1, small: 8, set: 7, ext: 2 });
    expect(max([{ id: "0" }, { id: "1" }, { id: "2" }, { id: "3" }])).toEqual({
      echo: 3,
      cpu: 1,
      cuda: 4,
      pairs: 2,
      small: 4,
      set: 7,
      ext: 4,
    });
    // On a CPU host only CPU endpoints can start; a cuda one on the external provider gets 1.
    expect(load({ endpoints: { cpu: endpoints.cpu, ext: endpoints.ext } }, []).config.endpoints).toMatchObject({
      cpu: { workersMax: 1 },
      ext: { workersMax: 1 },
    });
  });

  test("default startTimeoutMs: 10 minutes for the bundled model endpoints (their setup loads weights), 2 for the others; a setting wins", async () => {
    const builtIn = await loadConfig(undefined, { detectGpus: () => [] });
    expect(Object.fromEntries(Object.entries(builtIn.endpoints).map(([id, ep]) => [id, ep.startTimeoutMs]))).toEqual({
      echo: 120_000,
      words: 120_000,
      slow: 120_000,
      "image-quality": 600_000,
      "image-fast": 600_000,
      text: 600_000,
    });
    const { config } = load({
      endpoints: { set: { handler: H, startTimeoutMs: 5_000, options: { device: "cpu" } }, ext: { options: { device: "cuda" } } },
    });
    expect([config.endpoints.set!.startTimeoutMs, config.endpoints.ext!.startTimeoutMs]).toEqual([5_000, 600_000]);
    expect(() => parseConfig({ endpoints: { e: { startTimeoutMs: 0 } } }, "spool.toml")).toThrow("spool.toml: endpoints.e.startTimeoutMs");
  });

  test("an endpoint whose worker can never be placed is refused at load, by name, with what is missing", () => {
    const refused = (endpoint: NonNullable<ConfigInput["endpoints"]>[string], devices: GpuDevice[]) => {
      try {
        load({ endpoints: { img: { handler: H, ...endpoint } } }, devices);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error("not refused");
    };
    expect(refused({ options: { device: "cuda" } }, [])).toBe(
      'spool.toml: endpoints.img: each worker needs 1 GPU (options.device = "cuda"), and this host has no GPU (nvidia-smi lists none; server.gpus is unset): set server.gpus, gpusPerWorker or gpuMemoryMb, or options.device = "cpu"',
    );
    expect(refused({ gpusPerWorker: 4 }, parseNvidiaSmi(TWO_H100))).toBe(
      'spool.toml: endpoints.img: each worker needs 4 GPUs, and the GPUs here are 0 (81559 MiB), 1 (81559 MiB): set server.gpus, gpusPerWorker or gpuMemoryMb, or options.device = "cpu"',
    );
    expect(refused({ gpuMemoryMb: 90_000, options: { device: "cuda" } }, parseNvidiaSmi(TWO_H100))).toMatch(
      /each worker needs 1 GPU with 90000 MiB free \(options.device = "cuda"\), and the GPUs here are 0 \(81559 MiB\)/,
    );
  });

  test("a config read only for its store (spool keys, spool usage) neither looks up GPUs nor refuses a GPU endpoint", () => {
    let detected = 0;
    const config = parseConfig({ endpoints: { img: { handler: H, options: { device: "cuda" } } } }, "spool.toml", {
      serving: false,
      detectGpus: () => (detected++, []),
    });
    expect({ detected, gpus: config.server.gpus, workersMax: config.endpoints.img!.workersMax }).toEqual({
      detected: 0,
      gpus: [],
      workersMax: 1,
    });
  });

  test("capacity: whole devices, memory shares, and workers spanning several devices", () => {
    const devs = (...mem: (number | undefined)[]) =>
      mem.map((memoryMb, i) => (memoryMb === undefined ? { id: String(i) } : { id: String(i), memoryMb }));
    expect(gpuCapacity(devs(80, 80, 80), { gpus: 1 })).toBe(3);
    expect(gpuCapacity(devs(80, 80, 80), { gpus: 2 })).toBe(1);
    expect(gpuCapacity(devs(80, 24, undefined), { gpus: 1, memoryMb: 20 })).toBe(4 + 1 + 1);
    // Four slots on one device and one on another: a two-device worker fits once.
    expect(gpuCapacity(devs(80, 20), { gpus: 2, memoryMb: 20 })).toBe(1);
    expect(gpuCapacity(devs(10, 10), { gpus: 1, memoryMb: 20 })).toBe(0);
    expect(gpuCapacity(devs(80, 80, 80, 80), { gpus: 3, memoryMb: 20 })).toBe(5); // 16 slots, 4 a device
    // Figures far past any card are counted, not looped over.
    expect(gpuCapacity(devs(80_000_000, 80_000_000), { gpus: 1, memoryMb: 1 })).toBe(160_000_000);
    expect(gpuCapacity(devs(80_000_000, 80_000_000), { gpus: 2, memoryMb: 1 })).toBe(80_000_000);
  });
});
