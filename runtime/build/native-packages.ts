import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** The GPU runtime a build embeds besides the CPU one. */
export type GpuKind = "cuda" | "vulkan";

/** A part that cannot be embedded: the build stops with this reason. */
export class EmbedError extends Error {
  override name = "EmbedError";
}

/** node-llama-cpp's name for this machine's prebuilt binaries (`linux-x64`, `mac-arm64`...). */
function llamaPlatform(): string {
  const os = process.platform === "darwin" ? "mac" : process.platform === "win32" ? "win" : process.platform;
  return `${os}-${process.arch}`;
}

/**
 * Files a package reads at run time relative to its own `import.meta.url`, besides its
 * JavaScript (which is bundled) and the addons it requires (found by the build): globs under
 * the package root, or null when the package needs none. Packages listed here also get their
 * `import.meta.url` pointed into the extracted tree, so those reads find the files.
 */
export function packageDataFiles(name: string, gpu: GpuKind | undefined): string[] | null {
  if (name === "node-llama-cpp") return ["package.json", "llama/*.json", "llama/grammars/**"];
  const prebuilt = /^@node-llama-cpp\/(.+)$/.exec(name)?.[1];
  if (prebuilt !== undefined) {
    // Only this machine's CPU build, plus the GPU build asked for; the others stay out
    // (their loaders then find no package.json and node-llama-cpp reports them unavailable).
    // cuda-ext holds the CUDA 12 fallback of the CUDA 13 build.
    const wanted = [llamaPlatform(), ...(gpu ? [`${llamaPlatform()}-${gpu}`] : []), ...(gpu === "cuda" ? [`${llamaPlatform()}-cuda-ext`] : [])];
    return wanted.includes(prebuilt) ? ["package.json", "bins/**"] : [];
  }
  return null;
}

/** Whether a package's JavaScript gets its `import.meta.url` pointed into the extracted tree. */
export function readsOwnFiles(name: string): boolean {
  return packageDataFiles(name, undefined) !== null;
}

/**
 * What a GPU build needs from the installed packages, checked before anything is embedded:
 * `used` are the package names the bundle reached, `nodeModules` where they are installed.
 * Throws an EmbedError naming the command that installs what is missing.
 */
export function checkGpuParts(gpu: GpuKind, used: Set<string>, resolvePackage: (name: string) => string | null): void {
  if (used.has("onnxruntime-node") && gpu === "cuda") {
    const root = resolvePackage("onnxruntime-node");
    const bin = root && join(root, "bin", "napi-v6", process.platform, process.arch);
    if (!bin || !existsSync(join(bin, "libonnxruntime_providers_cuda.so"))) {
      throw new EmbedError(
        `onnxruntime-node has no CUDA provider libraries (libonnxruntime_providers_cuda.so${bin ? ` in ${bin}` : ""}): ` +
          `this project's .npmrc skips its CUDA download at npm install. Install them with:\n` +
          `  (cd ${root ?? "node_modules/onnxruntime-node"} && ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js)`,
      );
    }
  }
  if (used.has("node-llama-cpp")) {
    const name = `@node-llama-cpp/${llamaPlatform()}-${gpu}`;
    const root = resolvePackage(name);
    if (!root || !existsSync(join(root, "bins"))) {
      const version = JSON.parse(readFileSync(join(resolvePackage("node-llama-cpp")!, "package.json"), "utf8")).version as string;
      throw new EmbedError(`node-llama-cpp's ${gpu} build (${name}) is not installed. Install it with:\n  npm install --no-save ${name}@${version}`);
    }
  }
}
