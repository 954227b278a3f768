/** What a GPU check bundle holds and where: shared by the build (stage.ts) and the check (check.ts). */
import type { GpuKind } from "../../runtime/build/native-packages.ts";

/** One check: the handler it runs, on which GPU API. */
export interface BundlePart {
  name: "image" | "text";
  /** The handler source, relative to the checkout. */
  handler: string;
  /** The GPU build of node-llama-cpp to carry (ONNX Runtime's WebGPU comes with its CPU package). */
  gpu?: GpuKind;
  /** The device of its GPU endpoint. */
  device: "webgpu" | "vulkan";
}

export const PARTS: Record<BundlePart["name"], BundlePart> = {
  image: { name: "image", handler: "handlers/image/fast.ts", device: "webgpu" },
  text: { name: "text", handler: "handlers/text/handler.ts", gpu: "vulkan", device: "vulkan" },
};

/** The GPU machine's platform: the bundle carries this machine's Bun, so it must be the same. */
export const BUNDLE_TARGET = "linux-x64";

/** Where things lie under the unpacked root (run.sh and check.ts rely on these names). */
export const LAYOUT = {
  bun: "bun",
  serverDir: "server",
  serverCli: "server/cli.js",
  workerDir: "worker",
  /** Native files of the worker: the same bytes from build to build, so they pack apart. */
  nativeDir: "worker/assets",
  check: "check.js",
  /** The script the scaler starts as the endpoints' handler. */
  workerCommand: "bin/worker",
  flux: "models/tiny-flux-fp16",
  gguf: "models/tiny.gguf",
} as const;
