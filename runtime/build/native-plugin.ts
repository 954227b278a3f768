import type { BunPlugin } from "bun";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { filePlatform } from "./binary-format.ts";
import { addonClosure } from "./library-deps.ts";
import {
  checkGpuParts,
  checkPublished,
  EmbedError,
  packageDataFiles,
  platformPackageOwner,
  platformPackages,
  publishedPlatforms,
  readsOwnFiles,
  type GpuKind,
} from "./native-packages.ts";
import { bundleCreatedRequires, guardDynamicRequires } from "./require-rewrites.ts";
import { fetchPlatformPackage } from "./target-packages.ts";
import type { Target } from "./targets.ts";

const CACHE_MODULE = resolve(import.meta.dir, "native-cache.ts");
const MANIFEST = "spool-native:manifest";

/** One embedded file: where it is now and where it goes under the extraction root. */
export interface EmbeddedFile {
  path: string;
  source: string;
  size: number;
}

/** What the plugin embedded, known once the build is done. */
export interface NativeParts {
  files: EmbeddedFile[];
  hash: string;
  /** Package names the bundle's JavaScript came from. */
  packages: Set<string>;
}

/** A package name with a platform in it (`-linux-x64`, `-darwin-arm64`...). */
const PLATFORM_IN_NAME = /^(@[\w.-]+\/)?[\w.-]*-(linux|darwin|win32|freebsd|android)-(x64|arm64|arm|ia32|riscv64|ppc64|s390x)\b/;

/** Whether a native file is for the target (files that are no executable code are). */
function forTarget(file: string, target: Target): boolean {
  const platform = filePlatform(file);
  return !platform || (platform.os === target.os && platform.arch === target.arch);
}

/** Loaders that search the disk for an addon at run time (node-gyp-build, bindings): what they find cannot be embedded. */
const RUNTIME_ADDON_LOADERS = /^(bindings|node-gyp-build|node-gyp-build-optional-packages)$/;

/** Where a file goes under the extraction root: its path below the last node_modules (so `$ORIGIN` paths still meet). */
export function rootPath(file: string, projectRoot: string): string {
  const parts = file.split(sep);
  const at = parts.lastIndexOf("node_modules");
  return at >= 0 ? parts.slice(at + 1).join("/") : `app/${relative(projectRoot, file).split(sep).join("/")}`;
}

/** The package a file under node_modules belongs to: its name and folder; null outside node_modules. */
export function packageOf(file: string): { name: string; root: string } | null {
  const parts = file.split(sep);
  const at = parts.lastIndexOf("node_modules");
  if (at < 0 || at + 1 >= parts.length) return null;
  const scoped = parts[at + 1]!.startsWith("@");
  const name = scoped ? `${parts[at + 1]}/${parts[at + 2]}` : parts[at + 1]!;
  return { name, root: parts.slice(0, at + 2 + (scoped ? 1 : 0)).join(sep) };
}

/**
 * The Bun build plugin that makes native packages work from one file: every `.node` the
 * bundle requires becomes a call to the runtime loader (runtime/build/native-cache.ts), and
 * the addon, the libraries it needs beside it and the data files of packages that read their
 * own folder are embedded and listed in a generated manifest module. Requires made through
 * `createRequire(import.meta.url)` with a literal name are turned into bundled requires.
 */
export function nativePlugin(options: {
  projectRoot: string;
  /** The platform the binary is for: only its addons are embedded, its platform packages fetched when missing. */
  target: Target;
  gpu?: GpuKind;
  onDone: (parts: NativeParts) => void;
  /** Called once per package whose addon the build cannot embed (found at run time by a loader). */
  onWarning?: (message: string) => void;
  /** Progress lines (a platform package being fetched). */
  onProgress?: (line: string) => void;
}): BunPlugin {
  const addons = new Map<string, string>(); // absolute .node path -> root path
  const packages = new Map<string, string>(); // name -> folder
  const unembedded = new Set<string>();
  const problems: string[] = []; // parts with no prebuilt for the target, reported together
  /** The target's platform package `spec` names, when its owner (the importer's package) publishes it. */
  const fetchable = (spec: string, importer: string): { name: string; version: string } | null => {
    const owner = platformPackageOwner(spec);
    const from = packageOf(importer);
    if (!owner || from?.name !== owner) return null;
    const name = spec.split("/").slice(0, 2).join("/");
    if (!platformPackages(owner, options.target, options.gpu).includes(name)) return null;
    const version = publishedPlatforms(from.root)[name];
    return version ? { name, version } : null; // not published: collect() names the platforms that are
  };
  /** Whether a file belongs to a platform package of another platform than the target's (any GPU build of the target's is its own). */
  const otherPlatform = (file: string): boolean => {
    const pkg = packageOf(file);
    const owner = pkg && platformPackageOwner(pkg.name);
    if (!pkg || !owner) return false;
    return ![...platformPackages(owner, options.target, "cuda"), ...platformPackages(owner, options.target, "vulkan")].includes(pkg.name);
  };
  /** A platform package of the target that is not installed: fetched into the build's cache, resolved from there. */
  const fetched = (spec: string, importer: string): string | null => {
    const wanted = fetchable(spec, importer);
    if (!wanted) return null;
    try {
      return Bun.resolveSync(spec, fetchPlatformPackage(wanted.name, wanted.version, options.target, { log: options.onProgress }));
    } catch (err) {
      problems.push((err as Error).message);
      return null;
    }
  };
  return {
    name: "spool-native",
    setup(build) {
      build.onResolve({ filter: /\.node$/ }, (args) => {
        // The manifest embeds addons as plain files: Bun would load a .node import as an addon even with { type: "file" }.
        if (args.importer.endsWith(MANIFEST)) return { path: `${args.path}.embedded`, namespace: "spool-native-file" };
        const from = args.resolveDir || dirname(args.importer);
        let file: string;
        try {
          file = args.path.startsWith(".") || args.path.startsWith("/") ? resolve(from, args.path) : Bun.resolveSync(args.path, from);
        } catch {
          const got = fetched(args.path, args.importer);
          // Unresolvable and not the target's (another platform's addon): left to fail at run time, where packages catch it.
          if (!got) return undefined;
          file = got;
          if (!file.endsWith(".node")) return { path: file }; // sharp's index.cjs, from the build's cache
        }
        if (!existsSync(file)) {
          const missing = missingPrebuilt(args.path, from, options.target);
          if (missing) problems.push(`${packageOf(args.importer)?.name ?? args.importer} ${missing}`);
          return undefined;
        }
        // A package export named *.node can lead to JavaScript (sharp's index.cjs): bundle that as
        // usual, unless it is another platform's package (its require.resolve would embed its library).
        if (!file.endsWith(".node")) return otherPlatform(file) ? { path: args.path, namespace: "spool-missing" } : undefined;
        if (!forTarget(file, options.target)) return { path: file, namespace: "spool-foreign-addon" }; // another platform's, never loaded on the target
        addons.set(file, rootPath(file, options.projectRoot));
        return { path: file, namespace: "spool-native-addon" };
      });
      build.onLoad({ filter: /.*/, namespace: "spool-native-addon" }, (args) => ({
        contents: `const { native } = require(${JSON.stringify(MANIFEST)});\nmodule.exports = native.loadAddon(${JSON.stringify(addons.get(args.path))});\n`,
        loader: "js",
      }));
      // Packages published once per platform whose main is the addon (napi-rs's, e.g. @reflink/reflink-linux-x64-gnu)
      // are required by name, which Bun would embed as it is: another platform's stays out.
      build.onResolve({ filter: PLATFORM_IN_NAME }, (args) => {
        let file: string;
        try {
          file = Bun.resolveSync(args.path, args.resolveDir || dirname(args.importer));
        } catch {
          return undefined;
        }
        return file.endsWith(".node") && !forTarget(file, options.target) ? { path: file, namespace: "spool-foreign-addon" } : undefined;
      });
      build.onLoad({ filter: /.*/, namespace: "spool-foreign-addon" }, (args) => ({
        contents: `throw new Error(${JSON.stringify(`${basename(args.path)} is for another platform than ${options.target.name}; it is not in this binary`)});\n`,
        loader: "js",
      }));
      build.onLoad({ filter: /.*/, namespace: "spool-native-file" }, (args) => ({
        contents: readFileSync(args.path.replace(/\.embedded$/, "")),
        loader: "file",
      }));
      // Optional platform packages (node-llama-cpp's for other systems) are imported by name and
      // caught when missing: one not installed becomes a module that fails the same way at run time.
      build.onResolve({ filter: /^[@\w]/ }, (args) => {
        if (args.kind !== "dynamic-import") return undefined;
        const from = args.resolveDir || dirname(args.importer);
        if (resolvable(args.path, from))
          return otherPlatform(Bun.resolveSync(args.path, from)) ? { path: args.path, namespace: "spool-missing" } : undefined;
        const got = fetched(args.path, args.importer);
        if (got) return { path: got };
        return { path: args.path, namespace: "spool-missing" };
      });
      build.onLoad({ filter: /.*/, namespace: "spool-missing" }, (args) => ({
        contents: `throw Object.assign(new Error(${JSON.stringify(`Cannot find package '${args.path}' (not in this binary: not installed when it was built, or another platform's)`)}), { code: "ERR_MODULE_NOT_FOUND" });\n`,
        loader: "js",
      }));
      build.onResolve({ filter: RUNTIME_ADDON_LOADERS }, (args) => {
        const who = packageOf(args.importer)?.name ?? args.importer;
        if (!unembedded.has(who)) {
          unembedded.add(who);
          options.onWarning?.(
            `${who} finds its native addon at run time through ${args.path}; a single-file build cannot embed it, so the binary uses the package's fallback if it has one, or fails where it loads it`,
          );
        }
        return undefined;
      });
      build.onResolve({ filter: /^spool-native:manifest$/ }, () => ({ path: MANIFEST, namespace: "spool-native" }));
      build.onLoad({ filter: /.*/, namespace: "spool-native" }, async (args) => {
        await args.defer(); // every module is parsed: all addons and packages are known
        if (problems.length > 0) throw new EmbedError([...new Set(problems)].join("\n"));
        const parts = collect(addons, packages, options);
        options.onDone(parts);
        return { contents: manifestModule(parts), loader: "js" };
      });
      build.onLoad({ filter: /[\\/]node_modules[\\/].*\.(m?js|cjs)$/ }, (args) => {
        const pkg = packageOf(args.path);
        if (pkg) packages.set(pkg.name, pkg.root);
        const source = readFileSync(args.path, "utf8");
        const bundles = (spec: string) => resolvable(spec, dirname(args.path)) || fetchable(spec, args.path) !== null;
        let out = guardDynamicRequires(bundleCreatedRequires(source, bundles));
        if (pkg && readsOwnFiles(pkg.name) && out.includes("import.meta.url")) {
          // The folder is the package's own, so reads relative to it find the extracted files; the
          // file name says "bundled", so code that would run its own file again (node-llama-cpp's
          // binding test in a child process) sees that it is bundled and does not.
          const path = rootPath(args.path, options.projectRoot).replace(/[^/]+$/, (name) => `bundled-${name}`);
          const url = `__spoolNative.fileUrl(${JSON.stringify(path)})`;
          out = `import { native as __spoolNative } from ${JSON.stringify(MANIFEST)};\n${out.replaceAll("import.meta.url", url)}`;
        }
        return out === source ? undefined : { contents: out, loader: "js" };
      });
    },
  };
}

function resolvable(spec: string, dir: string): boolean {
  try {
    Bun.resolveSync(spec, dir);
    return true;
  } catch {
    return false;
  }
}

function collect(
  addons: Map<string, string>,
  packages: Map<string, string>,
  options: { projectRoot: string; target: Target; gpu?: GpuKind },
): NativeParts {
  for (const owner of ["sharp", "node-llama-cpp"]) {
    const root = packages.get(owner);
    if (root) checkPublished(owner, root, platformPackages(owner, options.target, undefined)[0]!, options.target, undefined);
  }
  if (options.gpu) checkGpuParts(options.gpu, options.target, new Set(packages.keys()), (name) => packages.get(name) ?? null);
  const files = new Map<string, string>(); // root path -> source
  const add = (source: string) => {
    const path = rootPath(source, options.projectRoot);
    if (!files.has(path)) files.set(path, source);
  };
  for (const addon of addons.keys()) {
    try {
      addonClosure(addon).forEach(add);
    } catch (err) {
      throw new EmbedError(`cannot embed native addon ${addon}: ${(err as Error).message}`);
    }
  }
  for (const [name, root] of packages) {
    const globs = packageDataFiles(name, options.gpu, options.target);
    for (const pattern of globs ?? []) {
      const hits = [...new Bun.Glob(pattern).scanSync({ cwd: root, onlyFiles: true })];
      if (hits.length === 0 && pattern.startsWith("bins"))
        throw new EmbedError(`${name} has no ${pattern} under ${root}; reinstall it (npm install) to embed its binaries`);
      for (const hit of hits) add(join(root, hit));
    }
  }
  const sorted = [...files].sort(([a], [b]) => a.localeCompare(b));
  const hasher = new Bun.CryptoHasher("sha256");
  const embedded = sorted.map(([path, source]) => {
    const bytes = readFileSync(source);
    if (!forTarget(source, options.target)) {
      const platform = filePlatform(source)!;
      throw new EmbedError(
        `${path} is a ${platform.os}-${platform.arch} file, not ${options.target.name}: the build would embed another platform's library`,
      );
    }
    hasher.update(`${path}\0${bytes.length}\0`);
    hasher.update(bytes);
    return { path, source, size: statSync(source).size };
  });
  return { files: embedded, hash: hasher.digest("hex").slice(0, 16), packages: new Set(packages.keys()) };
}

function manifestModule(parts: NativeParts): string {
  const imports = parts.files.map((f, i) => `import f${i} from ${JSON.stringify(f.source)} with { type: "file" };`);
  // A compiled binary names its files absolutely (/$bunfs/...); a bundle that is not compiled
  // names them relative to its own folder, where its assets were written, whatever the cwd.
  const list = parts.files.map((f, i) => `{ path: ${JSON.stringify(f.path)}, source: __spoolAt(f${i}), size: ${f.size} }`);
  return (
    `import { NativeCache } from ${JSON.stringify(CACHE_MODULE)};\nimport { resolve as __spoolResolve } from "node:path";\n${imports.join("\n")}\n` +
    `const __spoolAt = (file) => __spoolResolve(import.meta.dir, file);\n` +
    `export const native = new NativeCache({ hash: ${JSON.stringify(parts.hash)}, files: [${list.join(", ")}] });\n`
  );
}

/**
 * Why a relative addon path with the target's `<os>/<arch>` in it (onnxruntime's
 * `bin/napi-v6/${process.platform}/${process.arch}/...`, inlined for the target) is missing:
 * the platforms the package has prebuilts for, from its folders; null for other paths.
 */
export function missingPrebuilt(spec: string, from: string, target: Target): string | null {
  const at = spec.indexOf(`/${target.os}/${target.arch}/`);
  if (at < 0 || !spec.startsWith(".")) return null;
  const parent = resolve(from, spec.slice(0, at));
  const file = spec.slice(at + target.os.length + target.arch.length + 3);
  const found = [...new Bun.Glob(`*/*/${file}`).scanSync({ cwd: parent, onlyFiles: true })]
    .map((p) => p.split("/").slice(0, 2).join("-"))
    .sort();
  return `has no prebuilt for ${target.name} (no ${join(parent, target.os, target.arch, file)}); it has prebuilts for: ${found.join(", ") || "no platform"}`;
}
