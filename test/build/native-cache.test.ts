import { afterEach, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import {
  cacheBase,
  extractInto,
  mountedNoexec,
  NativeCache,
  PRUNE_AFTER_MS,
  pruneAll,
  type NativeManifest,
} from "../../runtime/build/native-cache.ts";

const dirs: string[] = [];
const tempDir = (prefix = "spool-native-") => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A manifest over real files on disk (a built binary's sources are /$bunfs paths; reading is the same). */
function diskManifest(hash = "0123456789abcdef"): NativeManifest {
  const src = tempDir("spool-native-src-");
  const files = [
    { path: "pkg/bin/libthing.so.1", bytes: Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251)) },
    { path: "pkg/bin/addon.node", bytes: Buffer.from("not really an addon") },
    { path: "other/package.json", bytes: Buffer.from('{"version":"1.0.0"}') },
  ];
  return {
    hash,
    files: files.map((f, i) => {
      const source = join(src, `f${i}`);
      writeFileSync(source, f.bytes);
      return { path: f.path, source, size: f.bytes.length };
    }),
  };
}

const contents = (root: string, m: NativeManifest) => m.files.map((f) => readFileSync(join(root, f.path)).equals(readFileSync(f.source)));

describe("native cache", () => {
  test("the cache base follows SPOOL_CACHE_DIR, then XDG_CACHE_HOME, then ~/.cache", () => {
    expect(cacheBase({ SPOOL_CACHE_DIR: "/c", XDG_CACHE_HOME: "/x", HOME: "/h" })).toEqual({ dir: "/c/spool", setting: "SPOOL_CACHE_DIR" });
    expect(cacheBase({ XDG_CACHE_HOME: "/x", HOME: "/h" })).toEqual({ dir: "/x/spool", setting: "XDG_CACHE_HOME" });
    expect(cacheBase({ HOME: "/h" })).toEqual({ dir: "/h/.cache/spool", setting: "HOME" });
  });

  test("extracts once into native-<hash>; a later start reuses the files as they are", () => {
    const m = diskManifest();
    const base = tempDir();
    const root = extractInto(m, base);
    expect(root).toBe(join(base, "native-0123456789abcdef"));
    expect(contents(root, m)).toEqual([true, true, true]);
    const before = m.files.map((f) => statSync(join(root, f.path)).ino);
    expect(extractInto(m, base)).toBe(root);
    expect(m.files.map((f) => statSync(join(root, f.path)).ino)).toEqual(before); // not written again
    expect(readdirSync(base)).toEqual(["native-0123456789abcdef"]); // no temp folders left
  });

  test("a changed or missing file in the cache is detected and extracted again", () => {
    const m = diskManifest();
    const base = tempDir();
    const root = extractInto(m, base);
    writeFileSync(join(root, "pkg/bin/libthing.so.1"), "tampered");
    expect(contents(extractInto(m, base), m)).toEqual([true, true, true]);
    rmSync(join(root, "pkg/bin/addon.node"));
    expect(contents(extractInto(m, base), m)).toEqual([true, true, true]);
  });

  test("an addon that fails to load from an entry that passed its check (same size and time) is extracted again and loaded", () => {
    const vips = require.resolve("@img/sharp-libvips-linux-x64/binary");
    const addonDir = join(dirname(require.resolve("@img/sharp-linux-x64/package")), "lib");
    const addon = readdirSync(addonDir).find((n) => n.endsWith(".node"))!;
    const m: NativeManifest = {
      hash: "5a4e5a4e5a4e5a4e",
      files: [
        { path: `@img/sharp-linux-x64/lib/${addon}`, source: join(addonDir, addon), size: statSync(join(addonDir, addon)).size },
        { path: `@img/sharp-libvips-linux-x64/lib/${basename(vips)}`, source: vips, size: statSync(vips).size },
      ],
    };
    const cacheDir = tempDir();
    const root = extractInto(m, join(cacheDir, "spool"));
    const target = join(root, m.files[0]!.path);
    writeFileSync(target, Buffer.alloc(m.files[0]!.size)); // zeros, as a power loss can leave
    // ... with a stamp that still matches it (the check compares sizes and times only)
    const stampFile = join(root, ".spool-native.json");
    const stamp = JSON.parse(readFileSync(stampFile, "utf8"));
    stamp.files[0].mtimeMs = statSync(target).mtimeMs;
    writeFileSync(stampFile, JSON.stringify(stamp));
    const warnings: string[] = [];
    const loaded = new NativeCache(m, { SPOOL_CACHE_DIR: cacheDir }, (w) => warnings.push(w)).loadAddon(m.files[0]!.path) as Record<
      string,
      unknown
    >;
    expect(typeof loaded.libvipsVersion).toBe("function"); // sharp's addon, loaded with its libvips beside it
    expect(warnings).toEqual([expect.stringContaining(`loading ${m.files[0]!.path} from ${root} failed`)]);
    expect(readFileSync(target).equals(readFileSync(m.files[0]!.source))).toBe(true);
  });

  test("simultaneous first starts in separate processes all get a whole entry", async () => {
    const m = diskManifest();
    const base = tempDir();
    const script =
      `import { extractInto } from ${JSON.stringify(join(import.meta.dir, "../../runtime/build/native-cache.ts"))};\n` +
      `console.log(extractInto(${JSON.stringify(m)}, ${JSON.stringify(base)}));\n`;
    const file = join(tempDir(), "extract.ts");
    writeFileSync(file, script);
    const procs = Array.from({ length: 4 }, () => Bun.spawn([process.execPath, file], { stdout: "pipe", stderr: "pipe" }));
    const outs = await Promise.all(
      procs.map(async (p) => [await p.exited, (await new Response(p.stdout).text()).trim(), await new Response(p.stderr).text()]),
    );
    expect(outs).toEqual(Array(4).fill([0, join(base, "native-0123456789abcdef"), ""]));
    expect(contents(join(base, "native-0123456789abcdef"), m)).toEqual([true, true, true]);
    expect(readdirSync(base)).toEqual(["native-0123456789abcdef"]);
  });

  test("an unusable cache dir falls back to the OS temp dir and says so; with both unusable the error names the dir and the variable", () => {
    const m = diskManifest();
    const blocker = join(tempDir(), "a-file");
    writeFileSync(blocker, "");
    const tmp = tempDir();
    const warnings: string[] = [];
    const cache = new NativeCache(m, { SPOOL_CACHE_DIR: join(blocker, "cache"), TMPDIR: tmp }, (w) => warnings.push(w));
    expect(cache.dir()).toBe(join(tmp, `spool-cache-${process.getuid!()}`, "native-0123456789abcdef"));
    expect(contents(cache.dir(), m)).toEqual([true, true, true]);
    expect(statSync(join(tmp, `spool-cache-${process.getuid!()}`)).mode & 0o777).toBe(0o700); // no one else can plant an entry in it
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`native cache ${join(blocker, "cache", "spool")} is not usable (ENOTDIR`);
    expect(warnings[0]).toContain("Set SPOOL_CACHE_DIR");

    const broken = new NativeCache(m, { SPOOL_CACHE_DIR: join(blocker, "cache"), TMPDIR: join(blocker, "tmp") }, () => {});
    expect(() => broken.dir()).toThrow(`cannot extract this binary's native libraries: ${join(blocker, "cache", "spool")} is not usable`);
    expect(() => broken.dir()).toThrow("Set SPOOL_CACHE_DIR to a writable directory");
  });

  test("a fallback folder that is a link, another user's, or writable by others is not trusted: the process extracts into a private one of its own", () => {
    const m = diskManifest();
    const blocker = join(tempDir(), "a-file");
    writeFileSync(blocker, "");
    // What another local user can plant under the predictable name: an entry of this very hash,
    // with files of the right sizes and a stamp that matches them, holding other code.
    const evilSource = tempDir();
    const evil: NativeManifest = {
      hash: m.hash,
      files: m.files.map((f, i) => {
        writeFileSync(join(evilSource, `e${i}`), Buffer.alloc(f.size, 0x45));
        return { ...f, source: join(evilSource, `e${i}`) };
      }),
    };
    const plant = (tmp: string, how: "world-writable" | "other owner" | "symlink" | "file" | "dangling symlink") => {
      const shared = join(tmp, `spool-cache-${process.getuid!()}`);
      if (how === "file") writeFileSync(shared, "not a folder");
      if (how === "dangling symlink") symlinkSync(join(tmp, "nowhere"), shared);
      if (how === "file" || how === "dangling symlink") return shared;
      const at = how === "symlink" ? join(tmp, "elsewhere") : shared;
      extractInto(evil, at);
      if (how === "world-writable") chmodSync(at, 0o777);
      if (how === "other owner") chownSync(at, 65534, 65534);
      if (how === "symlink") symlinkSync(at, shared);
      return shared;
    };
    const cases = [
      { how: "world-writable" as const, why: "it is writable by everyone (mode 777)" },
      { how: "symlink" as const, why: "it is a symbolic link" },
      // a name taken by something that is no folder: the start goes on in a private one
      { how: "file" as const, why: "it is not a directory" },
      { how: "dangling symlink" as const, why: "it is a symbolic link" },
      // only root can give a folder away; as another user the world-writable case stands for it
      ...(process.getuid!() === 0 ? [{ how: "other owner" as const, why: `it is owned by uid 65534, not 0` }] : []),
    ];
    for (const { how, why } of cases) {
      const tmp = tempDir();
      const shared = plant(tmp, how);
      const warnings: string[] = [];
      const root = new NativeCache(m, { SPOOL_CACHE_DIR: join(blocker, "cache"), TMPDIR: tmp }, (w) => warnings.push(w)).dir();
      expect({ how, contents: contents(root, m) }).toEqual({ how, contents: [true, true, true] });
      const own = dirname(root);
      expect(own.startsWith(`${shared}-`)).toBe(true);
      expect(lstatSync(own).isDirectory()).toBe(true);
      expect(statSync(own).mode & 0o777).toBe(0o700);
      expect(warnings).toEqual([
        expect.stringContaining(`); ${shared} is not safe to use (${why}), so using ${own} for this process only. Set SPOOL_CACHE_DIR to`),
      ]);
    }
  });

  test("a noexec mount is recognised from the mount table (longest matching mount point wins)", () => {
    const dir = tempDir();
    const table = join(dir, "mountinfo");
    const line = (point: string, opts: string) => `36 35 98:0 / ${point} ${opts} master:1 - ext3 /dev/root rw`;
    writeFileSync(table, [line("/", "rw,relatime"), line(dir, "rw,noexec,nosuid")].join("\n"));
    expect(mountedNoexec(dir, table)).toBe(true);
    writeFileSync(table, [line("/", "rw,noexec"), line(dir, "rw,relatime")].join("\n"));
    expect(mountedNoexec(dir, table)).toBe(false);
  });

  test("entries unused for a week are pruned when a new one is extracted; `cache prune` removes all", () => {
    const base = tempDir();
    const old = join(base, "native-oldoldoldoldold1");
    const recent = join(base, "native-recentrecent0001");
    for (const d of [old, recent]) mkdirSync(d, { recursive: true });
    const weekAgo = new Date(Date.now() - PRUNE_AFTER_MS - 60_000);
    utimesSync(old, weekAgo, weekAgo);
    const root = extractInto(diskManifest(), base);
    expect(readdirSync(base).sort()).toEqual(["native-0123456789abcdef", "native-recentrecent0001"]);
    expect(pruneAll(base).removed.sort()).toEqual([root, recent]);
    expect(readdirSync(base)).toEqual([]);
  });
});
