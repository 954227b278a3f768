/**
 * Packs a staged bundle into xz-compressed tar files. Bun and the native libraries are the same
 * bytes from one build to the next and take minutes to compress, so their archives are kept in a
 * cache by content; only the JavaScript and the models are compressed on every build.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";

/** One archive of the bundle: the staged paths it holds. */
export interface PackGroup {
  /** File name in the bundle, e.g. `bun.tar.xz`. */
  file: string;
  /** Paths relative to the staging root; a folder takes all it holds. */
  paths: string[];
  /** Whether its bytes are worth keeping between builds (they do not change with the sources). */
  cached: boolean;
  /** Machine code: xz's x86 filter makes it about 4% smaller. */
  code: boolean;
  /** Paths left out of it (given to another group). */
  exclude?: string[];
}

/** What pack() wrote: each archive and its size. */
export interface Packed {
  file: string;
  bytes: number;
  fromCache: boolean;
}

function run(cmd: string[], label: string): void {
  const r = Bun.spawnSync(cmd, { stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${label} failed (exit ${r.exitCode}): ${r.stderr.toString().trim()}`);
}

/** A tar of `paths` whose bytes depend only on the files' names, modes and contents. */
function tarTo(stage: string, group: PackGroup, out: string): void {
  const exclude = (group.exclude ?? []).map((p) => `--exclude=./${p}`);
  run(
    [
      "tar",
      "-C",
      stage,
      "--sort=name",
      "--mtime=@0",
      "--owner=0",
      "--group=0",
      "--numeric-owner",
      "--format=gnu",
      ...exclude,
      "-cf",
      out,
      ...group.paths.map((p) => `./${p}`),
    ],
    `tar of ${group.file}`,
  );
}

async function sha256(file: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(file).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/**
 * xz at its default level, on every core: a cold build (and the test's, on a fresh machine) takes
 * about a minute where the strongest level took several, for a folder about 1.5 MiB bigger.
 */
async function compress(input: string, output: string, code: boolean): Promise<void> {
  const filters = code ? ["--x86", "--lzma2=preset=6"] : ["--lzma2=preset=6"];
  const proc = Bun.spawn(["xz", ...filters, "-T0", "-c", input], { stdout: Bun.file(output), stderr: "pipe" });
  const [code_, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code_ !== 0) throw new Error(`xz of ${input} failed (exit ${code_}): ${err.trim()}`);
}

/**
 * Writes each group as `<bundle>/<group.file>`. Cached groups come from `cacheDir` when a tar of
 * the same bytes was compressed before; groups that must be compressed are compressed at once,
 * one xz process each.
 */
export async function pack(
  stage: string,
  groups: PackGroup[],
  bundle: string,
  cacheDir: string,
  log: (line: string) => void = console.log,
): Promise<Packed[]> {
  mkdirSync(cacheDir, { recursive: true });
  prune(cacheDir);
  const scratch = join(bundle, ".tar");
  mkdirSync(scratch, { recursive: true });
  try {
    return await Promise.all(
      groups.map(async (group, i) => {
        const tar = join(scratch, `${i}.tar`);
        tarTo(stage, group, tar);
        const target = join(bundle, group.file);
        if (!group.cached) {
          await compress(tar, target, group.code);
          return { file: group.file, bytes: statSync(target).size, fromCache: false };
        }
        const cached = join(cacheDir, `${await sha256(tar)}${group.code ? ".x86" : ""}.tar.xz`);
        const hit = existsSync(cached);
        if (hit) {
          const now = new Date();
          utimesSync(cached, now, now); // in use: prune() keeps it
        } else {
          log(`  compressing ${group.file} (${(statSync(tar).size / 1e6).toFixed(0)} MB; kept in ${cacheDir} for later builds)`);
          const partial = `${cached}.partial-${process.pid}`;
          try {
            await compress(tar, partial, group.code);
            renameSync(partial, cached);
          } finally {
            rmSync(partial, { force: true });
          }
        }
        copyFileSync(cached, target);
        return { file: group.file, bytes: statSync(target).size, fromCache: hit };
      }),
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** An archive unused this long (another Bun, other native packages) is removed at the next build. */
export const PRUNE_AFTER_MS = 30 * 24 * 3600_000;

function prune(cacheDir: string): void {
  const before = Date.now() - PRUNE_AFTER_MS;
  for (const name of readdirSync(cacheDir)) {
    const file = join(cacheDir, name);
    if (name.endsWith(".tar.xz") && statSync(file).mtimeMs < before) rmSync(file, { force: true });
  }
}
