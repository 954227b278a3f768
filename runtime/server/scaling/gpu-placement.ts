import type { GpuDevice, GpuNeed } from "../../config/gpus.ts";

/**
 * The environment that shows a worker its GPUs and no others. CUDA takes the cards' UUIDs, which
 * name the same card whatever CUDA's own device order; PCI bus order numbers them inside the
 * worker as nvidia-smi does (and makes an id that is an index mean nvidia-smi's index). Vulkan's
 * GGML_VK_VISIBLE_DEVICES is left as the server has it: it takes Vulkan's own indices, which
 * follow neither order.
 */
export const gpuEnv = (ids: string[]): Record<string, string> => ({ CUDA_VISIBLE_DEVICES: ids.join(","), CUDA_DEVICE_ORDER: "PCI_BUS_ID" });

/** The GPUs one worker was given, handed back with release(). */
export interface GpuGrant {
  readonly ids: string[];
  readonly memoryMb?: number;
}

/** Where the servers on one host agree on who holds a card (GpuLocks). */
export interface CardLocks {
  tryLock(id: string): { release(): void } | undefined;
}

interface DeviceState {
  device: GpuDevice;
  /** Workers on it. */
  workers: number;
  /** Memory (MiB) their figures add up to. */
  usedMb: number;
  /** A worker with no memory figure has it to itself. */
  whole: boolean;
  /** This server's hold on the card, while it has workers there. */
  lock?: { release(): void };
  /** Another server held the card at the last try. */
  elsewhere: boolean;
}

/**
 * Which worker holds which GPU. A worker with no memory figure takes whole, empty devices; one with
 * a figure shares a device with others while their figures fit its memory (a device of unknown
 * memory holds one worker). Shared workers go to the fullest device they fit on, so whole devices
 * stay free for workers that need them. With `locks`, a device no worker here is on is first
 * locked for this server, and skipped while another server holds it.
 */
export class GpuPlacement {
  readonly #devices: DeviceState[];

  constructor(
    readonly devices: readonly GpuDevice[],
    private readonly locks?: CardLocks,
  ) {
    this.#devices = devices.map((device) => ({ device, workers: 0, usedMb: 0, whole: false, elsewhere: false }));
  }

  /** Devices with no worker on them. */
  get free(): number {
    return this.#devices.filter((d) => d.workers === 0).length;
  }

  /** Devices with no worker here that another server held when last tried. */
  get heldElsewhere(): number {
    return this.#devices.filter((d) => d.workers === 0 && d.elsewhere).length;
  }

  /** GPUs for a new worker, or undefined while too few have room (the scale-up waits). */
  take(need: GpuNeed): GpuGrant | undefined {
    const fits = this.#devices.filter((d) => this.#fits(d, need.memoryMb));
    if (fits.length < need.gpus) return undefined;
    // Shared workers pack onto the fullest card they fit on; a card of unknown memory, which holds
    // one worker whole, comes last.
    const room = (d: DeviceState) => (d.device.memoryMb === undefined ? Infinity : d.device.memoryMb - d.usedMb);
    const order = need.memoryMb === undefined ? fits : fits.sort((a, b) => room(a) - room(b));
    const chosen: DeviceState[] = [];
    const locked: DeviceState[] = [];
    for (const d of order) {
      if (chosen.length === need.gpus) break;
      if (d.workers === 0 && this.locks) {
        const lock = this.locks.tryLock(d.device.id);
        d.elsewhere = !lock;
        if (!lock) continue;
        d.lock = lock;
        locked.push(d);
      }
      chosen.push(d);
    }
    if (chosen.length < need.gpus) {
      for (const d of locked) this.#unlock(d);
      return undefined;
    }
    for (const d of chosen) {
      d.workers++;
      d.usedMb += need.memoryMb ?? 0;
      d.whole = need.memoryMb === undefined || d.device.memoryMb === undefined;
    }
    const ids = chosen.map((d) => d.device.id);
    return need.memoryMb === undefined ? { ids } : { ids, memoryMb: need.memoryMb };
  }

  /** Gives a worker's GPUs back (once it has exited); a card left with no worker here is unlocked. */
  release(grant: GpuGrant): void {
    for (const id of grant.ids) {
      const d = this.#devices.find((x) => x.device.id === id);
      if (!d || d.workers === 0) continue;
      d.workers--;
      d.usedMb = Math.max(0, d.usedMb - (grant.memoryMb ?? 0));
      if (d.workers === 0) {
        d.whole = false;
        this.#unlock(d);
      }
    }
  }

  /** Gives the grant back when disposed, unless keep() was called first (a worker holds it now). */
  returnUnlessKept(grant: GpuGrant): Disposable & { keep(): void } {
    let kept = false;
    return {
      keep: () => void (kept = true),
      [Symbol.dispose]: () => void (kept || this.release(grant)),
    };
  }

  #unlock(d: DeviceState): void {
    d.lock?.release();
    d.lock = undefined;
  }

  #fits(d: DeviceState, memoryMb: number | undefined): boolean {
    if (d.workers === 0) return memoryMb === undefined || d.device.memoryMb === undefined || memoryMb <= d.device.memoryMb;
    if (d.whole || memoryMb === undefined || d.device.memoryMb === undefined) return false;
    return d.usedMb + memoryMb <= d.device.memoryMb;
  }
}
