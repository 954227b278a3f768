import { existsSync, lstatSync, mkdirSync, readdirSync, realpathSync, symlinkSync } from "node:fs";
import { delimiter, join } from "node:path";

/**
 * A PATH with node, npm and npx but no Bun: each directory that holds a `bun` is left out, and
 * node's tools are linked into `toolsDir` in case they share a directory with one. A project
 * must then run on the Bun that the spool package brings.
 */
export function pathWithoutBun(toolsDir: string): string {
  mkdirSync(toolsDir, { recursive: true });
  for (const tool of ["node", "npm", "npx"]) {
    const found = Bun.which(tool);
    if (!found) throw new Error(`${tool} is not on PATH: the package tests run npm`);
    symlinkSync(realpathSync(found), join(toolsDir, tool));
  }
  const rest = (process.env.PATH ?? "").split(delimiter).filter((d) => d && !existsSync(join(d, "bun")) && !existsSync(join(d, "bun.exe")));
  return [toolsDir, ...rest].join(delimiter);
}

/** Runs a command to its end: its stdout, and stdout then stderr; throws with both when it fails, so a failed step says why. */
export function run(cmd: string[], cwd: string, env: Record<string, string | undefined>): { stdout: string; output: string } {
  const r = Bun.spawnSync(cmd, { cwd, env, stdout: "pipe", stderr: "pipe" });
  const stdout = r.stdout.toString();
  const output = stdout + r.stderr.toString();
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")} in ${cwd} exited ${r.exitCode}:\n${output}`);
  return { stdout, output };
}

/** Bytes and files under a folder, each hard-linked file counted once (npm and bun link Bun's binary twice). */
export function folderSize(dir: string, seen = new Set<string>()): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const st = lstatSync(path);
    if (entry.isDirectory()) {
      const sub = folderSize(path, seen);
      bytes += sub.bytes;
      files += sub.files;
    } else if (entry.isFile()) {
      const inode = `${st.dev}:${st.ino}`;
      if (seen.has(inode)) continue;
      seen.add(inode);
      bytes += st.size;
      files++;
    }
  }
  return { bytes, files };
}

/** One line on a project's node_modules: packages, files and MB, and how much of it is Bun. */
export function describeInstall(label: string, project: string): string {
  const modules = join(project, "node_modules");
  const seen = new Set<string>();
  const bun = [join(modules, "bun"), ...readdirSync(join(modules, "@oven")).map((n) => join(modules, "@oven", n))]
    .filter((d) => existsSync(d))
    .reduce((sum, d) => sum + folderSize(d, seen).bytes, 0);
  const all = folderSize(modules);
  const packages = countPackages(modules);
  const mb = (n: number) => (n / 1e6).toFixed(1);
  return `${label}: ${packages} packages, ${all.files} files, ${mb(all.bytes)} MB installed (${mb(all.bytes - bun)} MB beside Bun's ${mb(bun)} MB)`;
}

function countPackages(modules: string): number {
  let n = 0;
  for (const entry of readdirSync(modules, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const path = join(modules, entry.name);
    if (entry.name.startsWith("@")) n += countPackages(path);
    else if (existsSync(join(path, "package.json")))
      n += 1 + (existsSync(join(path, "node_modules")) ? countPackages(join(path, "node_modules")) : 0);
  }
  return n;
}
