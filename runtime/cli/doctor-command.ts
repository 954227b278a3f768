import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { dlopen } from "bun:ffi";
import { isCompiled } from "../executable.ts";

/** One shared library the GPU paths load, with a symbol it must export and who needs it. */
interface Library {
  name: string;
  symbol: string;
  neededBy: string;
}

const LIBRARIES: Library[] = [
  { name: "libcuda.so.1", symbol: "cuInit", neededBy: "every CUDA path (the NVIDIA driver)" },
  {
    name: "libcudart.so.12",
    symbol: "cudaGetDeviceCount",
    neededBy: "image on cuda (onnxruntime CUDA 12); text on cuda via the CUDA 12 fallback",
  },
  { name: "libcublas.so.12", symbol: "cublasCreate_v2", neededBy: "image on cuda; text on cuda via the CUDA 12 fallback" },
  { name: "libcublasLt.so.12", symbol: "cublasLtCreate", neededBy: "image on cuda" },
  { name: "libcurand.so.10", symbol: "curandCreateGenerator", neededBy: "image on cuda" },
  { name: "libcufft.so.11", symbol: "cufftPlan1d", neededBy: "image on cuda" },
  { name: "libcudnn.so.9", symbol: "cudnnGetVersion", neededBy: "image on cuda (cuDNN 9)" },
  { name: "libcudart.so.13", symbol: "cudaGetDeviceCount", neededBy: "text on cuda (node-llama-cpp's CUDA 13 prebuilt)" },
  { name: "libcublas.so.13", symbol: "cublasCreate_v2", neededBy: "text on cuda (node-llama-cpp's CUDA 13 prebuilt)" },
  { name: "libvulkan.so.1", symbol: "vkGetInstanceProcAddr", neededBy: "image on webgpu; text on vulkan" },
];

/** How to get what is missing; printed when it is. */
export const INSTALL_HINTS = {
  ortCuda:
    "ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node   (downloads onnxruntime's CUDA 12 provider from NuGet into node_modules/onnxruntime-node/bin; the env var overrides this project's .npmrc skip)",
  cudaRuntime:
    "the CUDA 12 runtime, cuBLAS, cuRAND, cuFFT and cuDNN 9, e.g. the nvidia/cuda:12.x-cudnn-runtime-ubuntu24.04 container image, or apt: cuda-libraries-12-x libcudnn9-cuda-12",
  cuda13:
    "for the text handler's CUDA 13 prebuilt: the CUDA 13 runtime and cuBLAS (cuda-libraries-13-x); without them node-llama-cpp falls back to its CUDA 12 build",
  vulkan: "libvulkan1 and the GPU driver's Vulkan ICD (apt: libvulkan1 mesa-vulkan-drivers, or the NVIDIA driver's)",
};

/**
 * Imports a model package at run time only: the bundler does not follow a name held in a
 * variable, so a compiled server (which carries no model packages) still builds and starts.
 */
const loadAtRun = (specifier: string): Promise<unknown> => import(specifier);
const NOT_IN_BUILD = isCompiled() ? " (a compiled server carries no model packages: run spool doctor from a checkout)" : "";

const ok = (s: string) => `  ok    ${s}`;
const no = (s: string) => `  --    ${s}`;

/** `spool doctor`: what this machine can run (devices, providers, libraries), and how to get what is missing. */
export async function doctorCommand(): Promise<number> {
  const lines: string[] = [`spool doctor: ${process.platform}/${process.arch}, bun ${Bun.version}`, "", "Devices"];
  lines.push(...devices());

  lines.push("", "Libraries (loaded with dlopen)");
  const loaded = new Map<string, boolean>();
  for (const lib of LIBRARIES) {
    const found = canLoad(lib);
    loaded.set(lib.name, found);
    lines.push((found ? ok : no)(`${lib.name.padEnd(18)} ${found ? "" : "missing: "}${lib.neededBy}`));
  }
  const cudnn = cudnnVersion();
  if (cudnn) lines.push(`        cuDNN ${cudnn}`);

  lines.push("", "Image handler (onnxruntime-node): devices for options.device");
  const hints = new Set<string>();
  try {
    const ort = (await loadAtRun("onnxruntime-node")) as typeof import("onnxruntime-node");
    const { checkDevice } = (await loadAtRun(
      new URL("../../handlers/image/device.ts", import.meta.url).href,
    )) as typeof import("../../handlers/image/device.ts");
    const ortBin = join(
      dirname(createRequire(import.meta.url).resolve("onnxruntime-node/package.json")),
      "bin/napi-v6",
      `${process.platform}`,
      process.arch,
    );
    const cudaProvider = existsSync(join(ortBin, "libonnxruntime_providers_cuda.so"));
    for (const device of ["cpu", "cuda", "webgpu"] as const) {
      if (device === "cuda" && !cudaProvider) {
        lines.push(no(`cuda    the CUDA provider is not installed (no libonnxruntime_providers_cuda.so in ${ortBin})`));
        hints.add(INSTALL_HINTS.ortCuda);
        continue;
      }
      const why = await checkDevice(device).then(
        () => "",
        (e: Error) => e.message.split(";")[0]!.slice(0, 200),
      );
      lines.push(why ? no(`${device.padEnd(7)} ${why}`) : ok(`${device.padEnd(7)} runs a test graph`));
    }
    lines.push(
      `        onnxruntime-node ${ort.env.versions?.common ?? ""} backends: ${ort
        .listSupportedBackends()
        .map((b) => b.name)
        .join(", ")}`,
    );
  } catch (err) {
    lines.push(no(`onnxruntime-node does not load here: ${(err as Error).message.split("\n")[0]}${NOT_IN_BUILD}`));
  }
  if (!["libcudart.so.12", "libcublas.so.12", "libcudnn.so.9"].every((n) => loaded.get(n))) hints.add(INSTALL_HINTS.cudaRuntime);

  lines.push("", "Text handler (node-llama-cpp): devices for options.device");
  try {
    const llama = (await loadAtRun("node-llama-cpp")) as typeof import("node-llama-cpp");
    const supported = await llama.getLlamaGpuTypes("supported");
    const prebuilt = ["linux-x64-cuda", "linux-x64-cuda-ext", "linux-x64-vulkan"].filter((p) => packageInstalled(`@node-llama-cpp/${p}`));
    lines.push(ok("cpu     always"));
    for (const gpu of ["cuda", "vulkan"] as const) {
      lines.push(
        (supported.includes(gpu) ? ok : no)(
          `${gpu.padEnd(7)} ${supported.includes(gpu) ? "libraries found" : "its libraries are not all on this machine"}`,
        ),
      );
    }
    lines.push(`        prebuilt binaries installed: ${prebuilt.join(", ") || "none"}`);
    if (!supported.includes("cuda")) hints.add(INSTALL_HINTS.cuda13);
    if (!supported.includes("vulkan")) hints.add(INSTALL_HINTS.vulkan);
  } catch (err) {
    lines.push(no(`node-llama-cpp does not load here: ${(err as Error).message.split("\n")[0]}${NOT_IN_BUILD}`));
  }

  lines.push(
    "",
    "Needed for GPUs: image on cuda = NVIDIA driver + CUDA 12 + cuDNN 9 + onnxruntime's CUDA provider; text on cuda = CUDA 13 runtime + cuBLAS 13 (or CUDA 12 with the cuda-ext fallback).",
  );
  if (hints.size) lines.push("", "To add what is missing:", ...[...hints].map((h) => `  ${h}`));
  console.log(lines.join("\n"));
  return 0;
}

function devices(): string[] {
  const smi = Bun.which("nvidia-smi");
  if (smi) {
    const r = Bun.spawnSync([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], { stderr: "pipe" });
    const gpus = r.stdout.toString().trim().split("\n").filter(Boolean);
    const cuda = /CUDA Version: ([\d.]+)/.exec(Bun.spawnSync([smi], { stderr: "pipe" }).stdout.toString())?.[1];
    if (gpus.length) return [...gpus.map((g) => ok(`NVIDIA ${g}`)), `        the driver supports CUDA up to ${cuda ?? "?"}`];
    return [no(`nvidia-smi found but lists no GPU: ${r.stderr.toString().trim().slice(0, 200)}`)];
  }
  const out: string[] = [];
  if (existsSync("/proc/driver/nvidia/version"))
    out.push(ok(`NVIDIA driver: ${readFileSync("/proc/driver/nvidia/version", "utf8").split("\n")[0]}`));
  else out.push(no("no NVIDIA GPU or driver seen (no nvidia-smi, no /proc/driver/nvidia)"));
  const render = existsSync("/dev/dri") ? readdirSync("/dev/dri").filter((f) => f.startsWith("renderD")) : [];
  out.push(
    (render.length ? ok : no)(
      render.length
        ? `GPU render nodes: ${render.map((r) => `/dev/dri/${r}`).join(", ")}`
        : "no GPU render node (/dev/dri/renderD*) for Vulkan",
    ),
  );
  return out;
}

function canLoad(lib: Library): boolean {
  try {
    dlopen(lib.name, { [lib.symbol]: { args: [], returns: "void" } }).close();
    return true;
  } catch {
    return false;
  }
}

function cudnnVersion(): string | undefined {
  try {
    const lib = dlopen("libcudnn.so.9", { cudnnGetVersion: { args: [], returns: "u64" } });
    const v = Number(lib.symbols.cudnnGetVersion());
    lib.close();
    return `${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`;
  } catch {
    return undefined;
  }
}

function packageInstalled(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
}
