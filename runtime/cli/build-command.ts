import { mkdtempSync, renameSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { loadHandler } from "../worker/handler-loader.ts";
import { nativePlugin, type NativeParts } from "../build/native-plugin.ts";
import type { GpuKind } from "../build/native-packages.ts";
import { isCompiled } from "../executable.ts";
import { compileTarget, hostTarget, parseTarget, type Target } from "../build/targets.ts";
import { buildServer, partialPath } from "./build-server.ts";

const WORKER_MAIN = resolve(import.meta.dir, "../worker/worker-main.ts");
const COMMAND_SPECS = resolve(import.meta.dir, "command-specs.ts");
const PROJECT_ROOT = resolve(import.meta.dir, "../..");
const GPUS: GpuKind[] = ["cuda", "vulkan"];

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

/** The flags of `spool build` (runtime/cli/command-specs.ts). */
export interface BuildFlags {
  outfile?: string;
  target?: string;
  gpu?: string;
  server?: boolean;
}

/**
 * `spool build <handler.ts> --outfile PATH [--target PLATFORM] [--gpu cuda|vulkan]`: one
 * executable that is a worker for that handler (bun build --compile, bytecode for a fast
 * start), needing no Bun and no node_modules, for this machine or another platform. Native
 * addons and the files their packages read are embedded (the target's own, fetched from the npm
 * registry when not installed) and extracted once, at first start, into the cache
 * (runtime/build/native-cache.ts).
 */
export async function buildCommand(positionals: string[], values: BuildFlags): Promise<number> {
  const target = positionals[0];
  let platform: Target;
  try {
    platform = values.target !== undefined ? parseTarget(values.target) : hostTarget();
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  if (isCompiled()) {
    console.error("spool build needs the Spool sources and their packages: run it from a checkout (npx bun runtime/cli.ts build ...)");
    return 2;
  }
  if (values.server) {
    if (target !== undefined || values.gpu !== undefined) {
      console.error("spool build --server takes no handler and no --gpu: usage: spool build --server [--target PLATFORM] --outfile PATH");
      return 2;
    }
    return buildServer(resolve(values.outfile ?? "spool"), platform);
  }
  if (!target) {
    console.error(
      "usage: spool build <handler.ts> [--outfile PATH] [--target PLATFORM] [--gpu cuda|vulkan]\n       spool build --server [--target PLATFORM] [--outfile PATH]",
    );
    return 2;
  }
  if (values.gpu !== undefined && !GPUS.includes(values.gpu as GpuKind)) {
    console.error(`--gpu must be one of ${GPUS.join(", ")}, got ${values.gpu}`);
    return 2;
  }
  const gpu = values.gpu as GpuKind | undefined;
  const handlerPath = resolve(target);
  await loadHandler(handlerPath); // fail early, with a clear message, on a file that is no handler
  const outfile = resolve(values.outfile ?? basename(target).replace(/\.[^.]+$/, ""));
  const dir = mkdtempSync(join(tmpdir(), "spool-build-"));
  // Written beside the target and renamed over it once whole: a failed build leaves any earlier binary as it was.
  const partial = partialPath(outfile);
  try {
    const entry = join(dir, "worker-entry.ts");
    await Bun.write(entry, workerEntry(handlerPath));
    console.log(`building ${outfile} from ${target} for ${platform.name}${gpu ? ` (with ${gpu})` : ""}`);
    let parts: NativeParts | undefined;
    let result: Awaited<ReturnType<typeof Bun.build>>;
    try {
      // ESM bytecode: handlers may use import.meta; bytecode makes the start fast.
      result = await Bun.build({
        entrypoints: [entry],
        compile: { outfile: partial, autoloadDotenv: false, autoloadBunfig: false, ...compileTarget(platform) },
        target: "bun",
        format: "esm",
        bytecode: true,
        minify: true,
        throw: false,
        plugins: [
          nativePlugin({
            projectRoot: PROJECT_ROOT,
            target: platform,
            gpu,
            onDone: (p) => (parts = p),
            onWarning: (m) => console.log(`  warning: ${m}`),
            onProgress: (m) => console.log(`  ${m}`),
          }),
        ],
      });
    } catch (err) {
      return fail((err as Error).message);
    }
    if (!result.success) return fail(result.logs.map((l) => String(l.message ?? l)).join("\n"));
    const warnings = result.logs.filter((l) => /error/i.test(String(l.message ?? l)));
    if (warnings.length > 0) return fail(warnings.map(String).join("\n"));
    renameSync(partial, outfile);
    printParts(parts);
    console.log(`built ${outfile} for ${platform.name} (${mb(statSync(outfile).size)})`);
    return 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(partial, { force: true });
  }
}

/** The source of a built worker's entry: the handler, run by the worker's main. */
export function workerEntry(handlerPath: string): string {
  return (
    `import handler from ${JSON.stringify(handlerPath)};\n` +
    `import { workerMain } from ${JSON.stringify(WORKER_MAIN)};\n` +
    `import { workerBinaryHelp } from ${JSON.stringify(COMMAND_SPECS)};\n` +
    `const args = process.argv.slice(2);\n` +
    `if (args.includes("--help") || args.includes("-h")) {\n  console.log(workerBinaryHelp("./" + process.execPath.split("/").pop()));\n  process.exit(0);\n}\n` +
    `workerMain(handler, args, args).then((code) => process.exit(code), (err) => {\n` +
    `  console.error(\`worker: \${err?.message ?? err}\`);\n  process.exit(1);\n});\n`
  );
}

function fail(reason: string): number {
  console.error(`spool build failed; no binary was made:\n${reason}`);
  return 1;
}

/** One line per embedded folder: where it lands under the extraction root, its files and bytes. */
function printParts(parts: NativeParts | undefined): void {
  if (!parts || parts.files.length === 0) return;
  const groups = new Map<string, { files: number; bytes: number }>();
  for (const file of parts.files) {
    const folder = file.path.includes("/") ? file.path.slice(0, file.path.lastIndexOf("/")) : ".";
    const group = groups.get(folder) ?? { files: 0, bytes: 0 };
    group.files++;
    group.bytes += file.size;
    groups.set(folder, group);
  }
  for (const [folder, g] of groups) console.log(`  embedded ${folder}/ (${g.files} file${g.files === 1 ? "" : "s"}, ${mb(g.bytes)})`);
  const total = parts.files.reduce((sum, f) => sum + f.size, 0);
  console.log(`  native parts: ${parts.files.length} files, ${mb(total)}, extracted once to <cache>/spool/native-${parts.hash}/`);
}
