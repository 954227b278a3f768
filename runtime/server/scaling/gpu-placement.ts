import type { EndpointConfig } from "../../config/config.ts";

/** The NVIDIA GPUs this machine has, by index; none when nvidia-smi is missing or fails. */
export function detectGpus(): string[] {
  try {
    const r = Bun.spawnSync(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], { stdout: "pipe", stderr: "ignore" });
    if (r.exitCode !== 0) return [];
    return r.stdout.toString().split("\n").map((l) => l.trim()).filter(Boolean);
  } catch {
    return [];
  }
}

/** GPUs one worker of the endpoint needs: its setting, or one for a model endpoint on cuda. */
export function gpusPerWorker(config: Pick<EndpointConfig, "gpusPerWorker" | "options">): number {
  return config.gpusPerWorker ?? (config.options.device === "cuda" ? 1 : 0);
}

/** The environment that shows a worker its GPUs and no others (CUDA, and Vulkan for llama.cpp). */
export const gpuEnv = (ids: string[]): Record<string, string> => ({ CUDA_VISIBLE_DEVICES: ids.join(","), GGML_VK_VISIBLE_DEVICES: ids.join(",") });

/** Which worker holds which GPU: a GPU goes to one worker at a time, and back when it exits. */
export class GpuPlacement {
  readonly #free: string[];

  constructor(readonly devices: readonly string[]) {
    this.#free = [...devices];
  }

  get free(): number {
    return this.#free.length;
  }

  /** `n` GPUs for a new worker, or undefined when fewer are free (the scale-up waits). */
  take(n: number): string[] | undefined {
    if (n > this.#free.length) return undefined;
    return this.#free.splice(0, n);
  }

  release(ids: readonly string[]): void {
    for (const id of ids) if (this.devices.includes(id) && !this.#free.includes(id)) this.#free.push(id);
  }
}
