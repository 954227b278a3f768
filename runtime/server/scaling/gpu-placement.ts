import type { GpuDevice, GpuNeed } from "../../config/gpus.ts";

/** The environment that shows a worker its GPUs and no others (CUDA, and Vulkan for llama.cpp). */
export const gpuEnv = (ids: string[]): Record<string, string> => ({ CUDA_VISIBLE_DEVICES: ids.join(","), GGML_VK_VISIBLE_DEVICES: ids.join(",") });

/** The GPUs one worker was given, handed back with release(). */
export interface GpuGrant {
  readonly ids: string[];
  readonly memoryMb?: number;
}

interface DeviceState {
  device: GpuDevice;
  /** Workers on it. */
  workers: number;
  /** Memory (MiB) their figures add up to. */
  usedMb: number;
  /** A worker with no memory figure has it to itself. */
  whole: boolean;
}

/**
 * Which worker holds which GPU. A worker with no memory figure takes whole, empty devices; one with
 * a figure shares a device with others while their figures fit its memory (a device of unknown
 * memory holds one worker). Shared workers go to the fullest device they fit on, so whole devices
 * stay free for workers that need them.
 */
export class GpuPlacement {
  readonly #devices: DeviceState[];

  constructor(readonly devices: readonly GpuDevice[]) {
    this.#devices = devices.map((device) => ({ device, workers: 0, usedMb: 0, whole: false }));
  }

  /** Devices with no worker on them. */
  get free(): number {
    return this.#devices.filter((d) => d.workers === 0).length;
  }

  /** GPUs for a new worker, or undefined while too few have room (the scale-up waits). */
  take(need: GpuNeed): GpuGrant | undefined {
    const fits = this.#devices.filter((d) => this.#fits(d, need.memoryMb));
    if (fits.length < need.gpus) return undefined;
    // Shared workers pack onto the fullest card they fit on; a card of unknown memory, which holds
    // one worker whole, comes last.
    const room = (d: DeviceState) => (d.device.memoryMb === undefined ? Infinity : d.device.memoryMb - d.usedMb);
    const chosen = need.memoryMb === undefined ? fits.slice(0, need.gpus) : fits.sort((a, b) => room(a) - room(b)).slice(0, need.gpus);
    for (const d of chosen) {
      d.workers++;
      d.usedMb += need.memoryMb ?? 0;
      d.whole = need.memoryMb === undefined || d.device.memoryMb === undefined;
    }
    const ids = chosen.map((d) => d.device.id);
    return need.memoryMb === undefined ? { ids } : { ids, memoryMb: need.memoryMb };
  }

  /** Gives a worker's GPUs back (once it has exited). */
  release(grant: GpuGrant): void {
    for (const id of grant.ids) {
      const d = this.#devices.find((x) => x.device.id === id);
      if (!d || d.workers === 0) continue;
      d.workers--;
      d.usedMb = Math.max(0, d.usedMb - (grant.memoryMb ?? 0));
      if (d.workers === 0) d.whole = false;
    }
  }

  #fits(d: DeviceState, memoryMb: number | undefined): boolean {
    if (d.workers === 0) return memoryMb === undefined || d.device.memoryMb === undefined || memoryMb <= d.device.memoryMb;
    if (d.whole || memoryMb === undefined || d.device.memoryMb === undefined) return false;
    return d.usedMb + memoryMb <= d.device.memoryMb;
  }
}
