import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLog } from "../../../runtime/log.ts";
import { GpuLocks } from "../../../runtime/server/scaling/gpu-locks.ts";
import { GpuPlacement } from "../../../runtime/server/scaling/gpu-placement.ts";

const H100 = 81_559;

describe("GpuPlacement", () => {
  test("workers with no memory figure take whole devices, one worker a device; a freed one is reused", () => {
    const gpus = new GpuPlacement([
      { id: "0", memoryMb: H100 },
      { id: "1", memoryMb: H100 },
    ]);
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
    expect([a, b]).toEqual([
      { ids: ["0"], memoryMb: 10_000 },
      { ids: ["0"], memoryMb: 10_000 },
    ]);
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
    const gpus = new GpuPlacement([
      { id: "0", memoryMb: H100 },
      { id: "1", memoryMb: 40_000 },
    ]);
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

describe("GpuPlacement with per-card locks", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  /** Two servers' placements of the same cards, sharing one lock folder (kernel locks, as across processes). */
  const pair = (devices: { id: string; memoryMb?: number }[]) => {
    const dir = mkdtempSync(join(tmpdir(), "spool-gpu-locks-"));
    dirs.push(dir);
    return [
      new GpuPlacement(devices, new GpuLocks(() => dir, silentLog)),
      new GpuPlacement(devices, new GpuLocks(() => dir, silentLog)),
    ] as const;
  };

  test("a card one placement holds is skipped by the other until its last worker is released", () => {
    const [a, b] = pair([
      { id: "GPU-a", memoryMb: 40_000 },
      { id: "GPU-b", memoryMb: 40_000 },
    ]);
    const small = { gpus: 1, memoryMb: 10_000 };
    const a1 = a.take(small)!;
    const a2 = a.take(small)!;
    expect([a1.ids, a2.ids]).toEqual([["GPU-a"], ["GPU-a"]]);
    expect(b.take({ gpus: 1 })).toEqual({ ids: ["GPU-b"] });
    expect(b.take(small)).toBeUndefined(); // GPU-b is b's whole; GPU-a is a's, whatever memory it has left
    expect(b.heldElsewhere).toBe(1);
    a.release(a1);
    expect(b.take(small)).toBeUndefined(); // a still has a worker on GPU-a
    a.release(a2);
    expect(b.take(small)).toEqual({ ids: ["GPU-a"], memoryMb: 10_000 });
    expect(b.heldElsewhere).toBe(0);
    expect(a.take({ gpus: 1 })).toBeUndefined();
    expect(a.heldElsewhere).toBe(2);
  });

  test("a worker on several cards that finds too few free takes none and leaves none locked", () => {
    const [a, b] = pair([{ id: "GPU-a" }, { id: "GPU-b" }, { id: "GPU-c" }]);
    const one = b.take({ gpus: 1 })!;
    expect(one.ids).toEqual(["GPU-a"]);
    expect(a.take({ gpus: 3 })).toBeUndefined();
    // What a locked while trying is free again: b takes the other two.
    expect(b.take({ gpus: 2 })).toEqual({ ids: ["GPU-b", "GPU-c"] });
  });

  test("a grant given back because no worker started on it frees its card; a kept one does not", () => {
    const [a, b] = pair([{ id: "GPU-a" }]);
    {
      const grant = a.take({ gpus: 1 })!;
      using unstarted = a.returnUnlessKept(grant);
      expect(b.take({ gpus: 1 })).toBeUndefined();
      void unstarted;
    }
    const kept = b.take({ gpus: 1 })!;
    expect(kept).toEqual({ ids: ["GPU-a"] });
    {
      using started = b.returnUnlessKept(kept);
      started.keep();
    }
    expect(a.take({ gpus: 1 })).toBeUndefined();
  });
});
