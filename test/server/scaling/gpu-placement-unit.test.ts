import { describe, expect, test } from "bun:test";
import { GpuPlacement } from "../../../runtime/server/scaling/gpu-placement.ts";

const H100 = 81_559;

describe("GpuPlacement", () => {
  test("workers with no memory figure take whole devices, one worker a device; a freed one is reused", () => {
    const gpus = new GpuPlacement([{ id: "0", memoryMb: H100 }, { id: "1", memoryMb: H100 }]);
    const a = gpus.take({ gpus: 1 })!;
    const b = gpus.take({ gpus: 1 })!;
    expect([a.ids, b.ids]).toEqual([["0"], ["1"]]);
    expect(gpus.take({ gpus: 1 })).toBeUndefined();
    expect(gpus.take({ gpus: 1, memoryMb: 1 })).toBeUndefined();
    gpus.release(b);
    expect(gpus.take({ gpus: 1 })).toEqual({ ids: ["1"] });
  });

  test("small models share a device while their figures fit its memory, never past it", () => {
    const gpus = new GpuPlacement([{ id: "0", memoryMb: 24_000 }]);
    const small = { gpus: 1, memoryMb: 10_000 };
    const a = gpus.take(small)!;
    const b = gpus.take(small)!;
    expect([a, b]).toEqual([{ ids: ["0"], memoryMb: 10_000 }, { ids: ["0"], memoryMb: 10_000 }]);
    // 20 000 of 24 000 MiB taken: a third does not fit, nor a worker that wants the device whole.
    expect(gpus.take(small)).toBeUndefined();
    expect(gpus.take({ gpus: 1 })).toBeUndefined();
    expect(gpus.take({ gpus: 1, memoryMb: 4_000 })).toEqual({ ids: ["0"], memoryMb: 4_000 });
    gpus.release(a);
    expect(gpus.take(small)).toEqual({ ids: ["0"], memoryMb: 10_000 });
  });

  test("a device held whole takes no shared worker; once its workers are gone it is whole again", () => {
    const gpus = new GpuPlacement([{ id: "0", memoryMb: H100 }]);
    const whole = gpus.take({ gpus: 1 })!;
    expect(gpus.take({ gpus: 1, memoryMb: 1_000 })).toBeUndefined();
    gpus.release(whole);
    const shared = gpus.take({ gpus: 1, memoryMb: 1_000 })!;
    expect(gpus.take({ gpus: 1 })).toBeUndefined();
    gpus.release(shared);
    expect(gpus.take({ gpus: 1 })).toEqual({ ids: ["0"] });
    expect(gpus.free).toBe(0);
  });

  test("shared workers go to the fullest device they fit on, keeping whole devices free", () => {
    const gpus = new GpuPlacement([{ id: "0", memoryMb: H100 }, { id: "1", memoryMb: 40_000 }]);
    expect(gpus.take({ gpus: 1, memoryMb: 30_000 })!.ids).toEqual(["1"]);
    expect(gpus.take({ gpus: 1, memoryMb: 10_000 })!.ids).toEqual(["1"]);
    expect(gpus.take({ gpus: 1 })!.ids).toEqual(["0"]);
    expect(gpus.take({ gpus: 1, memoryMb: 1 })).toBeUndefined();
  });

  test("a shared worker packs onto a card of known memory before it takes one of unknown memory whole", () => {
    const gpus = new GpuPlacement([{ id: "unknown" }, { id: "0", memoryMb: 40_000 }]);
    expect(gpus.take({ gpus: 1, memoryMb: 10_000 })!.ids).toEqual(["0"]);
    expect(gpus.take({ gpus: 1, memoryMb: 10_000 })!.ids).toEqual(["0"]);
    expect(gpus.take({ gpus: 1 })!.ids).toEqual(["unknown"]);
  });

  test("a device of unknown memory holds one worker, figure or not", () => {
    const gpus = new GpuPlacement([{ id: "GPU-a" }]);
    const a = gpus.take({ gpus: 1, memoryMb: 1 })!;
    expect(gpus.take({ gpus: 1, memoryMb: 1 })).toBeUndefined();
    gpus.release(a);
    expect(gpus.take({ gpus: 1 })).toEqual({ ids: ["GPU-a"] });
  });

  test("a worker on several devices gets distinct ones, all or none; a release is counted once per device", () => {
    const gpus = new GpuPlacement([{ id: "0" }, { id: "1" }, { id: "2" }]);
    const pair = gpus.take({ gpus: 2 })!;
    expect(pair.ids).toEqual(["0", "1"]);
    expect(gpus.take({ gpus: 2 })).toBeUndefined();
    expect(gpus.free).toBe(1);
    gpus.release(pair);
    gpus.release(pair);
    expect(gpus.free).toBe(3);
    expect(gpus.take({ gpus: 3 })!.ids).toEqual(["0", "1", "2"]);
  });
});
