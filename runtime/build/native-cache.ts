import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, sep } from "node:path";
import { pathToFileURL } from "node:url";

/** One file a built binary carries for its native packages, at `path` under the extraction root. */
export interface NativeFile {
  /** Relative path under the root, with `/` (mirrors node_modules: `onnxruntime-node/bin/...`). */
  path: string;
  /** Where the bytes are: a `/$bunfs/...` path in a compiled binary, or any readable file. */
  source: string;
  size: number;
}

/** Everything a built binary extracts: its files and the hash of their paths and contents. */
export interface NativeManifest {
  hash: string;
  files: NativeFile[];
}

/** What was written into a cache entry, to check it on later starts without reading it. */
interface Stamp {
  hash: string;
  files: Array<{ path: string; size: number; mtimeMs: number }>;
}

const STAMP = ".spool-native.json";
/** An entry unused this long is removed when another build extracts beside it. */
export const PRUNE_AFTER_MS = 7 * 24 * 3600_000;

/** The cache base and which setting chose it: `$SPOOL_CACHE_DIR/spool`, else `$XDG_CACHE_HOME/spool`, else `~/.cache/spool`. */
export function cacheBase(env: Record<string, string | undefined> = process.env): { dir: string; setting: string } {
  if (env.SPOOL_CACHE_DIR) return { dir: join(env.SPOOL_CACHE_DIR, "spool"), setting: "SPOOL_CACHE_DIR" };
  if (env.XDG_CACHE_HOME) return { dir: join(env.XDG_CACHE_HOME, "spool"), setting: "XDG_CACHE_HOME" };
  return { dir: join(env.HOME || homedir(), ".cache", "spool"), setting: "HOME" };
}

/** The fallback when the configured cache cannot be used: a per-user folder in the OS temp dir. */
export function fallbackBase(env: Record<string, string | undefined> = process.env): string {
  const uid = typeof process.getuid === "function" ? process.getuid() : "user";
  return join(env.TMPDIR || tmpdir(), `spool-cache-${uid}`);
}

/**
 * Creates the fallback folder (mode 0700) and returns it when it is safe to load code from: a
 * real directory (not a link) owned by this user and writable by no one else. The OS temp dir is
 * shared and the name is predictable, so another user could have made it first and planted an
 * entry with a matching stamp; then (`refused` says why) this process gets a fresh private folder
 * of its own instead, removed when it exits.
 */
export function openFallback(env: Record<string, string | undefined> = process.env): { dir: string; refused?: string } {
  const shared = fallbackBase(env);
  let refused: string | undefined;
  try {
    mkdirSync(shared, { recursive: true, mode: 0o700 });
    refused = unsafeReason(shared);
  } catch (err) {
    // Something else holds the name (a file, a dangling link someone planted): not ours to use.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    refused = lstatSync(shared).isSymbolicLink() ? "it is a symbolic link" : "it is not a directory";
  }
  if (!refused) return { dir: shared };
  const dir = mkdtempSync(`${shared}-`); // mode 0700, a name no one can take first
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  return { dir, refused };
}

/** Why `dir` must not be trusted with code (like the checks on XDG_RUNTIME_DIR), or undefined. */
function unsafeReason(dir: string): string | undefined {
  if (typeof process.getuid !== "function") return "no owner check on this platform";
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) return "it is a symbolic link";
  if (!st.isDirectory()) return "it is not a directory";
  if (st.uid !== process.getuid()) return `it is owned by uid ${st.uid}, not ${process.getuid()}`;
  if (st.mode & 0o022) return `it is writable by ${st.mode & 0o002 ? "everyone" : "its group"} (mode ${(st.mode & 0o777).toString(8)})`;
  return undefined;
}

/** A cache directory that cannot hold runnable native files (read-only, full, noexec). */
export class NativeCacheError extends Error {
  override name = "NativeCacheError";
}

/**
 * Extracts the native files of a built binary once per content hash into
 * `<cache>/native-<hash>/` and loads addons from there. The first start writes a temp folder
 * and renames it into place (so simultaneous first starts all succeed); later starts check
 * each file's size and modification time against the stamp written at extraction, and extract
 * again when something changed.
 */
export class NativeCache {
  private root: string | undefined;
  private repaired = false;

  constructor(
    private readonly manifest: NativeManifest,
    private readonly env: Record<string, string | undefined> = process.env,
    private readonly warn: (message: string) => void = (m) => process.stderr.write(`spool: ${m}\n`),
  ) {}

  /** The extraction root, extracting or repairing it on first use in this process. */
  dir(): string {
    this.root ??= this.prepare();
    return this.root;
  }

  /**
   * Loads an extracted native addon (`path` relative to the root) the way `require` would. An
   * addon that fails to load from a cache entry that passed its check (damaged with its size and
   * time kept, e.g. by a power loss during the first start) is extracted again once and retried.
   */
  loadAddon(path: string): unknown {
    const load = () => {
      const module = { exports: {} as unknown };
      process.dlopen(module, join(this.dir(), path));
      return module.exports;
    };
    try {
      return load();
    } catch (err) {
      if (this.repaired) throw err;
      this.repaired = true;
      this.warn(`loading ${path} from ${this.dir()} failed (${(err as Error).message}); extracting it again`);
      this.root = extractInto(this.manifest, dirname(this.dir()), { force: true });
      return load();
    }
  }

  /** The file URL a module at `path` would have inside the extracted tree (its `import.meta.url`). */
  fileUrl(path: string): string {
    return pathToFileURL(join(this.dir(), path)).href;
  }

  private prepare(): string {
    const { dir, setting } = cacheBase(this.env);
    try {
      return extractInto(this.manifest, dir);
    } catch (err) {
      const fallback = fallbackBase(this.env);
      const reason = (err as Error).message;
      try {
        const chosen = openFallback(this.env);
        const root = extractInto(this.manifest, chosen.dir);
        const using = chosen.refused
          ? `${fallback} is not safe to use (${chosen.refused}), so using ${chosen.dir} for this process only`
          : `using ${fallback}`;
        this.warn(
          `native cache ${dir} is not usable (${reason}); ${using}. Set ${setting === "SPOOL_CACHE_DIR" ? "SPOOL_CACHE_DIR" : "SPOOL_CACHE_DIR (or XDG_CACHE_HOME)"} to a writable directory that allows executing files.`,
        );
        return root;
      } catch (second) {
        throw new NativeCacheError(
          `cannot extract this binary's native libraries: ${dir} is not usable (${reason}), nor is ${fallback} (${describe(second)}). ` +
            `Set SPOOL_CACHE_DIR to a writable directory on a filesystem that allows executing files.`,
        );
      }
    }
  }
}

/** Makes `<base>/native-<hash>` hold exactly the manifest's files and returns it. */
export function extractInto(manifest: NativeManifest, base: string, options: { force?: boolean } = {}): string {
  const final = join(base, `native-${manifest.hash}`);
  if (!options.force && verify(final, manifest)) {
    touch(final);
    return final;
  }
  try {
    mkdirSync(base, { recursive: true });
  } catch (err) {
    throw new NativeCacheError(describe(err));
  }
  let tmp: string | undefined;
  try {
    tmp = mkdtempSync(join(base, `.native-${manifest.hash}-`));
    if (mountedNoexec(tmp)) throw new NativeCacheError(`${base} is on a filesystem mounted noexec`);
    writeEntry(tmp, manifest);
    if (existsSync(final)) {
      if (!options.force && verify(final, manifest)) return final; // another start repaired it meanwhile
      moveAside(final, base);
    }
    try {
      renameSync(tmp, final);
      tmp = undefined;
    } catch (err) {
      // Another process renamed its copy into place first: use it when it is whole.
      if (!verify(final, manifest)) throw err;
    }
    pruneStale(base, final);
    return final;
  } catch (err) {
    throw err instanceof NativeCacheError ? err : new NativeCacheError(describe(err));
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

function writeEntry(dir: string, manifest: NativeManifest): void {
  const stamp: Stamp = { hash: manifest.hash, files: [] };
  for (const file of manifest.files) {
    const target = join(dir, ...file.path.split("/"));
    mkdirSync(dirname(target), { recursive: true });
    const bytes = readFileSync(file.source);
    if (bytes.length !== file.size)
      throw new NativeCacheError(`embedded ${file.path} has ${bytes.length} bytes, expected ${file.size}; the binary is damaged`);
    // No fsync: it costs the first start more than the whole extraction on a busy disk, and an
    // entry damaged by a power loss is caught when its addon fails to load (see loadAddon).
    writeFileSync(target, bytes, { mode: 0o755 });
    stamp.files.push({ path: file.path, size: file.size, mtimeMs: statSync(target).mtimeMs });
  }
  writeFileSync(join(dir, STAMP), JSON.stringify(stamp));
}

/** True when `dir` holds this manifest's files as they were written (sizes and mtimes unchanged). */
export function verify(dir: string, manifest: NativeManifest): boolean {
  let stamp: Stamp;
  try {
    stamp = JSON.parse(readFileSync(join(dir, STAMP), "utf8")) as Stamp;
  } catch {
    return false;
  }
  if (stamp.hash !== manifest.hash || stamp.files.length !== manifest.files.length) return false;
  for (const file of stamp.files) {
    try {
      const st = statSync(join(dir, ...file.path.split("/")));
      if (!st.isFile() || st.size !== file.size || st.mtimeMs !== file.mtimeMs) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function moveAside(final: string, base: string): void {
  const trash = join(base, `.stale-${process.pid}-${Date.now()}`);
  try {
    renameSync(final, trash);
  } catch {
    return; // another process moved it first
  }
  rmSync(trash, { recursive: true, force: true });
}

function touch(dir: string): void {
  try {
    const now = new Date();
    utimesSync(dir, now, now);
  } catch {
    // a read-only cache still serves; it just ages for pruning
  }
}

/** Removes entries unused for PRUNE_AFTER_MS and temp folders of extractions that died. */
function pruneStale(base: string, keep: string, now = Date.now()): void {
  for (const name of safeList(base)) {
    const path = join(base, name);
    if (path === keep) continue;
    const isEntry = name.startsWith("native-");
    const isLeftover = name.startsWith(".native-") || name.startsWith(".stale-");
    if (!isEntry && !isLeftover) continue;
    try {
      const age = now - statSync(path).mtimeMs;
      if (age > (isEntry ? PRUNE_AFTER_MS : 3600_000)) rmSync(path, { recursive: true, force: true });
    } catch {
      // gone already
    }
  }
}

/** `spool cache prune`: removes every extracted entry (binaries extract again on their next start). */
export function pruneAll(base: string): { removed: string[]; bytes: number } {
  const removed: string[] = [];
  let bytes = 0;
  for (const name of safeList(base)) {
    if (!/^(native-|\.native-|\.stale-)/.test(name)) continue;
    const path = join(base, name);
    bytes += sizeOf(path);
    rmSync(path, { recursive: true, force: true });
    removed.push(path);
  }
  return { removed, bytes };
}

function sizeOf(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return safeList(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Whether the filesystem holding `path` is mounted noexec (where dlopen cannot map code). */
export function mountedNoexec(path: string, mountinfo = "/proc/self/mountinfo"): boolean {
  let text: string;
  try {
    text = readFileSync(mountinfo, "utf8");
  } catch {
    return false; // not Linux: the dlopen error will say it
  }
  const real = realpathSync(path);
  let best = { point: "", noexec: false };
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    const point = (fields[4] ?? "").replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (!point) continue;
    const inside = real === point || real.startsWith(point.endsWith(sep) ? point : point + sep);
    if (inside && point.length >= best.point.length) best = { point, noexec: (fields[5] ?? "").split(",").includes("noexec") };
  }
  return best.noexec;
}

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}
