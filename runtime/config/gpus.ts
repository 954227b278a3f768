import { z } from "zod";

/**
 * One GPU the scaler may place workers on; memoryMb unknown means it holds one worker at a time.
 * `id` is what a worker is given in CUDA_VISIBLE_DEVICES and what a server locks on the host: the
 * card's UUID (`GPU-…`) whenever nvidia-smi names it.
 */
export interface GpuDevice {
  id: string;
  /** nvidia-smi's index of the card, where known (for messages). */
  index?: string;
  memoryMb?: number;
}

const ID = /^[A-Za-z0-9-]{1,64}$/;
const gpuId = z.string().regex(ID, "must be a GPU index or UUID");

/** `server.gpus`: plain ids, or `{ id, memoryMb }` where small models are to share a card. */
export const gpusSchema = z.array(
  z.union([gpuId.transform((id): GpuDevice => ({ id })), z.strictObject({ id: gpuId, memoryMb: z.number().int().min(1).optional() })]),
);

/** The query whose answer parseNvidiaSmi reads. */
export const NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=uuid,index,memory.total", "--format=csv,noheader,nounits"];

/** Lines of `uuid, index, memory.total` (MiB, no units) as devices; lines that do not parse are skipped. */
export function parseNvidiaSmi(text: string): GpuDevice[] {
  const devices: GpuDevice[] = [];
  for (const line of text.split("\n")) {
    const [uuid, index, memory] = line.split(",").map((s) => s.trim());
    if (!uuid || !/^GPU-[0-9A-Fa-f-]{1,60}$/.test(uuid) || !index || !/^\d+$/.test(index)) continue;
    const memoryMb = Number(memory);
    devices.push(Number.isInteger(memoryMb) && memoryMb > 0 ? { id: uuid, index, memoryMb } : { id: uuid, index });
  }
  return devices;
}

/**
 * The NVIDIA GPUs this machine has, with their memory; none when nvidia-smi is missing or fails.
 * `env` is the environment it runs in (its PATH finds nvidia-smi).
 */
export function detectGpus(env: Record<string, string | undefined> = process.env): GpuDevice[] {
  try {
    const r = Bun.spawnSync(NVIDIA_SMI_QUERY, { env, stdout: "pipe", stderr: "ignore" });
    return r.exitCode === 0 ? parseNvidiaSmi(r.stdout.toString()) : [];
  } catch {
    return [];
  }
}

/** `server.gpus` names a card by nvidia-smi's index somewhere: only the machine can tell its UUID. */
export const namesIndexes = (configured: readonly GpuDevice[]): boolean => configured.some((d) => /^\d+$/.test(d.id));

/**
 * `server.gpus` with each card named by index or UUID that the machine lists given as its UUID and
 * index (so workers get the card meant whatever CUDA's own order, and every server on the host
 * locks the same card by the same name); the memory stays as configured. Ids the machine does not
 * list stay as written.
 */
export function resolveGpus(configured: readonly GpuDevice[], machine: readonly GpuDevice[]): GpuDevice[] {
  return configured.map((d) => {
    const found = machine.find((m) => m.id === d.id || m.index === d.id);
    if (!found) return d;
    return { ...d, id: found.id, ...(found.index === undefined ? {} : { index: found.index }) };
  });
}

/** How messages name a card: its index where known, else its id. */
export const gpuLabel = (d: GpuDevice): string => d.index ?? d.id;

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
  const slots = devices.map((d) =>
    need.memoryMb === undefined ? 1 : d.memoryMb === undefined ? 1 : Math.floor(d.memoryMb / need.memoryMb),
  );
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
