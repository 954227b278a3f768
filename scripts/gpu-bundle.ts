#!/usr/bin/env bun
/**
 * Makes the GPU check bundles: one folder per check (gpu-bundle/image/, gpu-bundle/text/), each
 * carrying everything the check needs on a GPU machine that has a driver but no Node, no Bun and
 * no package registry: Bun, the server and the worker bundled into JavaScript, the worker's
 * native libraries (ONNX Runtime with its WebGPU provider; node-llama-cpp's CPU and Vulkan
 * builds), the tiny model, the Vulkan loader's Debian packages, and run.sh.
 *
 *   bun scripts/gpu-bundle.ts [--out gpu-bundle] [--part image|text]... [--no-debs] [--limit-mib 60]
 *
 * Prints each folder's size and refuses to write one over the limit (or one that, with the
 * working tree beside it, passes the 64 MiB a call carries). docs/operations/gpu-check.md says
 * how to run them. Exit codes: 0 written, 1 a piece could not be made or a folder is too big,
 * 2 bad flags.
 */
import { chmodSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { cacheBase } from "../runtime/build/native-cache.ts";
import { makeTempDir, removeDir } from "./bench/harness/temp-dir.ts";
import { vulkanDebs } from "./gpu-bundle/debs.ts";
import { LAYOUT, PARTS, type BundlePart } from "./gpu-bundle/layout.ts";
import { pack, type PackGroup } from "./gpu-bundle/pack.ts";
import { stagePart } from "./gpu-bundle/stage.ts";

const REPO = resolve(import.meta.dir, "..");
const MIB = 1024 * 1024;
/** What one call to the GPU machine carries: the working tree and the carried folders together. */
const CARRY_LIMIT_MIB = 64;

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    out: { type: "string", default: "gpu-bundle" },
    part: { type: "string", multiple: true },
    "no-debs": { type: "boolean", default: false },
    "limit-mib": { type: "string", default: "60" },
  },
});
const names = flags.part ?? ["image", "text"];
const bad = names.filter((n) => !(n in PARTS));
const limitMib = Number(flags["limit-mib"]);
if (bad.length > 0 || !(limitMib > 0)) {
  console.error(
    `usage: bun scripts/gpu-bundle.ts [--out DIR] [--part image|text]... [--no-debs] [--limit-mib N]${bad.length ? `\nno such part: ${bad.join(", ")}` : ""}`,
  );
  process.exit(2);
}
const outDir = resolve(flags.out!);
const cacheDir = join(cacheBase().dir, "gpu-bundle");

/** The bytes of what travels with every call besides the carried folders: tracked and untracked, not ignored, files. */
function workingTreeBytes(): number {
  const r = Bun.spawnSync(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: REPO,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (r.exitCode !== 0) return 0;
  let bytes = 0;
  for (const path of r.stdout.toString().split("\0").filter(Boolean)) {
    try {
      bytes += statSync(join(REPO, path)).size;
    } catch {
      // deleted in the tree, still in the index: it does not travel
    }
  }
  return bytes;
}

/** A path as messages show it: relative to the working directory when it lies inside it. */
const shown = (path: string) => (relative(process.cwd(), path).startsWith("..") ? path : relative(process.cwd(), path));

const folderBytes = (dir: string): number =>
  readdirSync(dir, { recursive: true, withFileTypes: true }).reduce(
    (sum, e) => (e.isFile() ? sum + statSync(join(e.parentPath, e.name)).size : sum),
    0,
  );

const GROUPS: PackGroup[] = [
  { file: "bun.tar.xz", paths: [LAYOUT.bun], cached: true, code: true },
  { file: "native.tar.xz", paths: [LAYOUT.nativeDir], cached: true, code: true },
  {
    file: "app.tar.xz",
    paths: ["bin", LAYOUT.check, "models", LAYOUT.serverDir, LAYOUT.workerDir],
    exclude: [LAYOUT.nativeDir],
    cached: false,
    code: false,
  },
];

/** Stages, packs and checks one part; returns its size in bytes, or throws. */
async function makePart(part: BundlePart, debs: string[], treeBytes: number): Promise<number> {
  const stage = makeTempDir(`spool-gpu-bundle-${part.name}-`);
  const partial = join(outDir, `.${part.name}.partial-${process.pid}`);
  try {
    await stagePart(part, stage);
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(join(partial, "debs"), { recursive: true });
    const packed = await pack(stage, GROUPS, partial, cacheDir);
    await Promise.all(debs.map((deb) => Bun.write(join(partial, "debs", deb.split("/").pop()!), Bun.file(deb))));
    const script = readFileSync(join(import.meta.dir, "gpu-bundle/run.sh"), "utf8").replaceAll("@PART@", part.name);
    writeFileSync(join(partial, "run.sh"), script);
    chmodSync(join(partial, "run.sh"), 0o755);

    const bytes = folderBytes(partial);
    const where = shown(join(outDir, part.name));
    const pieces = [
      ...packed.map((p) => `${p.file} ${(p.bytes / MIB).toFixed(1)}${p.fromCache ? " (cached)" : ""}`),
      `debs ${(folderBytes(join(partial, "debs")) / MIB).toFixed(1)}`,
    ];
    const withTree = (bytes + treeBytes) / MIB;
    console.log(
      `${where}: ${(bytes / MIB).toFixed(1)} MiB (${pieces.join(", ")}); with the working tree (${(treeBytes / MIB).toFixed(1)} MiB) ${withTree.toFixed(1)} of the ${CARRY_LIMIT_MIB} MiB a call carries`,
    );
    if (bytes > limitMib * MIB)
      throw new Error(`${where} would be ${(bytes / MIB).toFixed(1)} MiB, over the ${limitMib} MiB limit; nothing was written`);
    if (withTree > CARRY_LIMIT_MIB)
      throw new Error(
        `${where} with the working tree would be ${withTree.toFixed(1)} MiB, over the ${CARRY_LIMIT_MIB} MiB a call carries; nothing was written`,
      );
    rmSync(join(outDir, part.name), { recursive: true, force: true });
    renameSync(partial, join(outDir, part.name));
    return bytes;
  } finally {
    removeDir(stage);
    rmSync(partial, { recursive: true, force: true });
  }
}

let code = 0;
try {
  mkdirSync(outDir, { recursive: true });
  const debs = flags["no-debs"] ? [] : vulkanDebs(join(cacheDir, "debs-amd64"));
  const treeBytes = workingTreeBytes();
  for (const name of names) {
    console.log(`building the ${name} check bundle`);
    await makePart(PARTS[name as BundlePart["name"]], debs, treeBytes);
  }
  console.log(`run each on the GPU machine with: bash ${shown(outDir)}/<part>/run.sh (docs/operations/gpu-check.md)`);
} catch (err) {
  console.error(`gpu-bundle: ${(err as Error).message}`);
  code = 1;
}
process.exit(code);
