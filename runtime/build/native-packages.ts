import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Target } from "./targets.ts";

/** The GPU runtime a build embeds besides the CPU one. */
export type GpuKind = "cuda" | "vulkan";

/** A part that cannot be embedded: the build stops with this reason. */
export class EmbedError extends Error {
  override name = "EmbedError";
}

/** node-llama-cpp's name for a target's prebuilt binaries (`linux-x64`, `mac-arm64-metal`...). */
function llamaPlatform(target: Target): string {
  if (target.os === "darwin") return target.arch === "arm64" ? "mac-arm64-metal" : "mac-x64";
  return `${target.os}-${target.arch}`;
}

/** Our name for a platform another package names its own way (node-llama-cpp's `mac-arm64-metal` is `darwin-arm64`). */
const platformName = (name: string) =>
  name
    .replace(/^mac-/, "darwin-")
    .replace(/-metal$/, "")
    .replace(/^win-/, "win32-");

/**
 * Packages published once per platform, which their owner imports by name: the ones a target
 * needs. A build installs these from the npm registry into its own cache when they are not in
 * node_modules (runtime/build/target-packages.ts).
 */
export function platformPackages(owner: string, target: Target, gpu: GpuKind | undefined): string[] {
  if (owner === "sharp") return [`@img/sharp-${target.os}-${target.arch}`];
  if (owner === "node-llama-cpp") {
    const base = `@node-llama-cpp/${llamaPlatform(target)}`;
    // cuda-ext holds the CUDA 12 fallback of the CUDA 13 build.
    return [base, ...(gpu ? [`${base}-${gpu}`] : []), ...(gpu === "cuda" ? [`${base}-cuda-ext`] : [])];
  }
  return [];
}

/** The owner of a platform package name (`@img/sharp-linux-arm64/sharp.node` → sharp), or null. */
export function platformPackageOwner(spec: string): string | null {
  if (/^@img\/sharp-(?!libvips)/.test(spec)) return "sharp";
  if (spec.startsWith("@node-llama-cpp/")) return "node-llama-cpp";
  return null;
}

/**
 * Files a package reads at run time relative to its own `import.meta.url`, besides its
 * JavaScript (which is bundled) and the addons it requires (found by the build): globs under
 * the package root, or null when the package needs none. Packages listed here also get their
 * `import.meta.url` pointed into the extracted tree, so those reads find the files.
 */
export function packageDataFiles(name: string, gpu: GpuKind | undefined, target: Target): string[] | null {
  if (name === "node-llama-cpp") return ["package.json", "llama/*.json", "llama/grammars/**"];
  if (name.startsWith("@node-llama-cpp/")) {
    // Only the target's CPU build, plus the GPU build asked for; the others stay out
    // (their loaders then find no package.json and node-llama-cpp reports them unavailable).
    return platformPackages("node-llama-cpp", target, gpu).includes(name) ? ["package.json", "bins/**"] : [];
  }
  return null;
}

/** Whether a package's JavaScript gets its `import.meta.url` pointed into the extracted tree. */
export function readsOwnFiles(name: string): boolean {
  return name === "node-llama-cpp" || name.startsWith("@node-llama-cpp/");
}

/** The platform packages an owner publishes (its optional dependencies), by name → version. */
export function publishedPlatforms(ownerRoot: string): Record<string, string> {
  const pkg = JSON.parse(readFileSync(join(ownerRoot, "package.json"), "utf8")) as { optionalDependencies?: Record<string, string> };
  return pkg.optionalDependencies ?? {};
}

/** Throws an EmbedError when `owner` publishes no `name` (no prebuilt for this target), naming the platforms it has. */
export function checkPublished(owner: string, ownerRoot: string, name: string, target: Target, gpu: GpuKind | undefined): void {
  const published = Object.keys(publishedPlatforms(ownerRoot));
  if (published.includes(name) || name.endsWith("-cuda-ext")) return;
  const prefix = owner === "sharp" ? "@img/sharp-" : "@node-llama-cpp/";
  const kind = gpu && name.endsWith(`-${gpu}`) ? gpu : undefined;
  const platforms = published
    .filter((p) => p.startsWith(prefix) && !p.includes("libvips") && (kind ? p.endsWith(`-${kind}`) : !/-(cuda|cuda-ext|vulkan)$/.test(p)))
    .map((p) => platformName(p.slice(prefix.length).replace(kind ? `-${kind}` : "", "")));
  throw new EmbedError(
    `${owner} has no ${kind ? `${kind} ` : ""}prebuilt for ${target.name} (${name} is not published); ` +
      `it has ${kind ? `${kind} ` : ""}prebuilts for: ${platforms.join(", ") || "no platform"}`,
  );
}

/**
 * What a GPU build needs from the packages, checked before anything is written: `used` are the
 * package names the bundle reached, `resolvePackage` where each is. Throws an EmbedError naming
 * what is missing and the command that installs it, or the platforms that have it.
 */
export function checkGpuParts(gpu: GpuKind, target: Target, used: Set<string>, resolvePackage: (name: string) => string | null): void {
  if (used.has("onnxruntime-node") && gpu === "cuda") {
    if (target.name !== "linux-x64") {
      throw new EmbedError(`onnxruntime-node has no CUDA prebuilt for ${target.name}; its CUDA provider exists for: linux-x64, win32-x64`);
    }
    const root = resolvePackage("onnxruntime-node");
    const bin = root && join(root, "bin", "napi-v6", target.os, target.arch);
    if (!bin || !existsSync(join(bin, "libonnxruntime_providers_cuda.so"))) {
      throw new EmbedError(
        `onnxruntime-node has no CUDA provider libraries (libonnxruntime_providers_cuda.so${bin ? ` in ${bin}` : ""}): ` +
          `this project's .npmrc skips its CUDA download at npm install. Install them with:\n` +
          `  (cd ${root ?? "node_modules/onnxruntime-node"} && ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js)`,
      );
    }
  }
  if (used.has("node-llama-cpp")) {
    const owner = resolvePackage("node-llama-cpp")!;
    const name = platformPackages("node-llama-cpp", target, gpu)[1]!;
    checkPublished("node-llama-cpp", owner, name, target, gpu);
    const root = resolvePackage(name);
    if (!root || !existsSync(join(root, "bins"))) {
      const version = publishedPlatforms(owner)[name];
      throw new EmbedError(
        `node-llama-cpp's ${gpu} build (${name}) is not installed. Install it with:\n  npm install --no-save ${name}@${version}`,
      );
    }
  }
}
