import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * What this machine has for the GPU paths, read from the system and the libraries themselves
 * (never from the handlers under test), so that tests check the GPU path where there is one and
 * the clear refusal where there is none.
 */

/** An NVIDIA GPU with its kernel driver. */
export const nvidiaGpu = (): boolean => existsSync("/proc/driver/nvidia/gpus") && readdirSync("/proc/driver/nvidia/gpus").length > 0;

/** onnxruntime-node's CUDA provider is installed (it is not by default: see `spool doctor`). */
export function ortCudaProvider(): boolean {
  const pkg = dirname(createRequire(import.meta.url).resolve("onnxruntime-node/package.json"));
  return existsSync(join(pkg, "bin/napi-v6", process.platform, process.arch, "libonnxruntime_providers_cuda.so"));
}

/** The image handler can run on cuda here. */
export const imageCuda = (): boolean => nvidiaGpu() && ortCudaProvider();

/** A GPU render node, which WebGPU (Dawn, through Vulkan) needs. */
export const renderNode = (): boolean => existsSync("/dev/dri") && readdirSync("/dev/dri").some((n) => n.startsWith("renderD"));
