import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { isCompiled } from "../executable.ts";

const TEMPLATE = join(import.meta.dir, "init-template");
const PACKAGE_ROOT = resolve(import.meta.dir, "../..");
/** Template files whose names npm would drop or rename when packing: stored without their dot. */
const DOTFILES = new Set(["gitignore"]);

/** `spool init [DIR] [--spool SPEC]`: a new project whose handlers depend on this package. */
export function initCommand(positionals: string[], values: { spool?: string }): number {
  if (positionals.length > 1) {
    console.error("spool init takes one folder (spool init --help lists its options)");
    return 2;
  }
  if (isCompiled()) {
    console.error("spool init needs the npm package's template: run it with npx spool init (or bunx spool init)");
    return 2;
  }
  const dir = resolve(positionals[0] ?? ".");
  if (existsSync(dir) && !statSync(dir).isDirectory()) {
    console.error(`spool init: ${dir} is not a folder`);
    return 2;
  }
  const files = templateFiles(TEMPLATE).map((rel) => ({ from: join(TEMPLATE, rel), to: join(dir, targetName(rel)) }));
  const pkgPath = join(dir, "package.json");
  const taken = [pkgPath, ...files.map((f) => f.to)].filter((p) => existsSync(p));
  if (taken.length > 0) {
    console.error(`spool init: not overwriting what is there: ${taken.map((p) => relative(process.cwd(), p) || p).join(", ")}`);
    return 2;
  }
  const name = projectName(basename(dir));
  const own = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as PackageJson;
  mkdirSync(dir, { recursive: true });
  writeFileSync(pkgPath, JSON.stringify(projectPackage(name, own, spoolSpec(values.spool, own.version, dir)), null, 2) + "\n");
  for (const f of files) {
    mkdirSync(dirname(f.to), { recursive: true });
    writeFileSync(f.to, readFileSync(f.from, "utf8").replaceAll("__NAME__", name));
  }
  const cd = relative(process.cwd(), dir);
  console.log(`Created ${name} in ${dir}. Next:\n${cd ? `  cd ${cd}\n` : ""}  npm install\n  npm test\n  npm run dev`);
  return 0;
}

interface PackageJson {
  name: string;
  version: string;
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/** The new project's package.json; the versions of zod, Bun and TypeScript are this package's own. */
function projectPackage(name: string, own: PackageJson, spec: string) {
  const dev = own.devDependencies ?? {};
  return {
    name,
    version: "0.1.0",
    private: true,
    type: "module",
    scripts: {
      dev: "spool dev src/handler.ts --endpoint hello",
      start: "spool serve --config spool.toml",
      test: "tsc --noEmit && bun test",
      build: "spool build src/handler.ts --outfile dist/hello-worker",
    },
    dependencies: { [own.name]: spec, zod: own.dependencies.zod! },
    // The scripts call bun and tsc, so the project names them (the Bun is the one Spool brings, deduplicated).
    devDependencies: {
      "@types/bun": dev["@types/bun"] ?? "latest",
      bun: own.dependencies.bun!,
      typescript: dev.typescript ?? "latest",
    },
  };
}

/** A range as given; a folder or tarball as a file: path relative to the new project (npm resolves it from there). */
function spoolSpec(spec: string | undefined, version: string, dir: string): string {
  if (spec === undefined) return `^${version}`;
  const path = spec.startsWith("file:") ? spec.slice(5) : spec;
  if (!existsSync(path)) return spec;
  const rel = relative(dir, resolve(path));
  return `file:${rel.startsWith(".") || rel.startsWith("/") ? rel : `./${rel}`}`;
}

/** npm's rules: lower case, no spaces, no leading dot or underscore. */
function projectName(folder: string): string {
  return (
    folder
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, "-")
      .replace(/^[._-]+/, "") || "spool-handlers"
  );
}

function targetName(rel: string): string {
  const base = basename(rel);
  return DOTFILES.has(base) ? join(dirname(rel), `.${base}`) : rel;
}

function templateFiles(root: string, sub = ""): string[] {
  return readdirSync(join(root, sub), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? templateFiles(root, join(sub, e.name)) : [join(sub, e.name)],
  );
}
