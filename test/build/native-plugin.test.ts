import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nativePlugin, packageOf, rootPath } from "../../runtime/build/native-plugin.ts";
import { bundleCreatedRequires, guardDynamicRequires } from "../../runtime/build/require-rewrites.ts";
import { ROOT } from "./built-binary.ts";
import { hostTarget } from "../../runtime/build/targets.ts";

describe("the native build plugin's rewrites", () => {
  test("files map to their path below the last node_modules; packages are named with their scope", () => {
    const file = "/p/node_modules/a/node_modules/@img/sharp-linux-x64/lib/x.node";
    expect(rootPath(file, "/p")).toBe("@img/sharp-linux-x64/lib/x.node");
    expect(rootPath("/p/native/y.node", "/p")).toBe("app/native/y.node");
    expect(packageOf(file)).toEqual({ name: "@img/sharp-linux-x64", root: "/p/node_modules/a/node_modules/@img/sharp-linux-x64" });
    expect(packageOf("/p/src/z.js")).toBeNull();
  });

  test("createRequire calls with a literal name the build can bundle become bundled requires; the rest stay runtime requires", () => {
    const src = [
      'import { createRequire } from "node:module";',
      "const require = createRequire(import.meta.url);",
      'const a = require("zod");',
      'const b = require("@img/no-such-package/sharp.node");',
      "const c = require(path);",
      'const d = require.resolve("zod");',
    ].join("\n");
    const bundles = (spec: string) => spec === "zod";
    expect(bundleCreatedRequires(src, bundles).split("\n")).toEqual([
      'import { createRequire } from "node:module";',
      "const __spoolRuntime_require = createRequire(import.meta.url);",
      'const a = require("zod");',
      'const b = __spoolRuntime_require("@img/no-such-package/sharp.node");',
      "const c = __spoolRuntime_require(path);",
      'const d = __spoolRuntime_require.resolve("zod");',
    ]);
  });

  test("a computed require of a package name fails as not bundled; builtins and paths still load", () => {
    const guarded = guardDynamicRequires("module.exports = (name) => { try { return require(name); } catch (e) { return e.message; } };");
    const load = new Function("module", "require", `${guarded}; return module.exports;`)({ exports: {} }, require) as (
      n: string,
    ) => unknown;
    expect(load("long")).toBe("Cannot find module 'long': it is not bundled into this binary");
    expect(load("node:path")).toBe(require("node:path"));
    expect(load(join(ROOT, "package.json"))).toMatchObject({ name: "spool" });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a bundle's source text, with its template literal
    expect(guardDynamicRequires('require("zod"); require(`./x/${a}.node`)')).toBe('require("zod"); require(`./x/${a}.node`)');
  });

  test("a package that finds its addon through node-gyp-build at run time is reported at build time", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-plugin-"));
    try {
      const entry = join(dir, "entry.ts");
      writeFileSync(entry, `import { pack } from ${JSON.stringify(require.resolve("msgpackr"))};\nconsole.log(pack({ a: 1 }).length);\n`);
      const warnings: string[] = [];
      const result = await Bun.build({
        entrypoints: [entry],
        target: "bun",
        plugins: [nativePlugin({ projectRoot: ROOT, target: hostTarget(), onDone: () => {}, onWarning: (w) => warnings.push(w) })],
      });
      expect(result.success).toBe(true);
      expect(warnings).toEqual([
        expect.stringMatching(
          /^msgpackr-extract finds its native addon at run time through node-gyp-build-optional-packages; a single-file build cannot embed it/,
        ),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a bundle that is not compiled loads its native files from beside itself, whatever the working directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-plugin-"));
    try {
      const entry = join(dir, "entry.ts");
      writeFileSync(
        entry,
        `import sharp from ${JSON.stringify(require.resolve("sharp"))};\nconst png = await sharp({ create: { width: 3, height: 2, channels: 3, background: "#c03" } }).png().toBuffer();\nconsole.log(JSON.stringify(await sharp(png).metadata().then((m) => [m.format, m.width, m.height])));\n`,
      );
      const out = join(dir, "out");
      const result = await Bun.build({
        entrypoints: [entry],
        outdir: out,
        target: "bun",
        plugins: [nativePlugin({ projectRoot: ROOT, target: hostTarget(), onDone: () => {} })],
      });
      expect(result.success).toBe(true);
      // Run from another folder, with no node_modules in reach: the addon and libvips come from out/.
      const elsewhere = join(dir, "elsewhere");
      mkdirSync(elsewhere);
      const run = Bun.spawnSync([process.execPath, join(out, "entry.js")], {
        cwd: elsewhere,
        env: { PATH: "/usr/bin:/bin", SPOOL_CACHE_DIR: join(dir, "cache") },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect({ code: run.exitCode, out: run.stdout.toString(), err: run.stderr.toString() }).toEqual({
        code: 0,
        out: '["png",3,2]\n',
        err: "",
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
