import { z } from "zod";

/** One GPU the scaler may place workers on; memoryMb unknown means it holds one worker at a time. */
export interface GpuDevice {
  id: string;
  memoryMb?: number;
}

const gpuId = z.string().regex(/^[A-Za-z0-9-]{1,64}$/, "must be a GPU index or UUID");

/** `server.gpus`: plain ids, or `{ id, memoryMb }` where small models are to share a card. */
export const gpusSchema = z.array(
  z.union([gpuId.transform((id): GpuDevice => ({ id })), z.strictObject({ id: gpuId, memoryMb: z.number().int().min(1).optional() })]),
);

/** The query whose answer parseNvidiaSmi reads. */
export const NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"];

/** Lines of `index, memory.total` (MiB, no units) as devices; lines that do not parse are skipped. */
export function parseNvidiaSmi(text: string): GpuDevice[] {
  const devices: GpuDevice[] = [];
  for (const line of text.split("\n")) {
    const [id, memory] = line.split(",").map((s) => s.trim());
    if (!id || !/^[A-Za-z0-9-]{1,64}$/.test(id)) continue;
    const memoryMb = Number(memory);
    devices.push(Number.isInteger(memoryMb) && memoryMb > 0 ? { id, memoryMb } : { id });
  }
  return devices;
}

/** The NVIDIA GPUs this machine has, with their memory; none when nvidia-smi is missing or fails. */
export function detectGpus(): GpuDevice[] {
  try {
    const r = Bun.spawnSync(NVIDIA_SMI_QUERY, { stdout: "pipe", stderr: "ignore" });
    return r.exitCode === 0 ? parseNvidiaSmi(r.stdout.toString()) : [];
  } catch {
    return [];
  }
}

/** What one worker of an endpoint takes: whole devices, or a share of each device's memory. */
export interface GpuNeed {
  /** Devices one worker gets. */
  gpus: number;
  /** Memory the worker needs on each of its devices; undefined: the devices are its alone. */
  memoryMb?: number;
}

/** How many workers with this need the devices hold at once (none fit: 0). */
export function gpuCapacity(devices: readonly GpuDevice[], need: GpuNeed): number {
  if (need.gpus === 0) return Infinity;
  const slots = devices.map((d) => (need.memoryMb === undefined ? 1 : d.memoryMb === undefined ? 1 : Math.floor(d.memoryMb / need.memoryMb)));
  // A worker on n devices takes one slot on each of n different devices: k workers fit when
  // the devices give k*n slots with no device giving more than k. Those k form a range from 0
  // (the slots past k shrink as k grows), so the largest is found by bisection.
  const fit = (k: number) => slots.reduce((sum, n) => sum + Math.min(n, k), 0) >= k * need.gpus;
  let [lo, hi] = [0, Math.floor(slots.reduce((sum, n) => sum + n, 0) / need.gpus)];
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fit(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
