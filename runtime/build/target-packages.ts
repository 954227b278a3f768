import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { cacheBase } from "./native-cache.ts";
import { EmbedError } from "./native-packages.ts";
import type { Target } from "./targets.ts";

/** Where a build keeps the platform packages it fetched: `<cache>/spool/packages/<target>/<name>@<version>/node_modules`. */
export function packagesDir(env: Record<string, string | undefined> = process.env): string {
  return join(cacheBase(env).dir, "packages");
}

/**
 * The node_modules folder holding `name@version` for `target`, installed from the npm registry
 * (with npm, so the user's registry settings apply) on first use. npm is told the target's OS
 * and CPU, so the package's own optional dependencies for that platform come too (sharp's
 * libvips). Installed into a temp folder and renamed into place: builds running at once all
 * succeed, and a failed install leaves nothing behind.
 */
export function fetchPlatformPackage(
  name: string,
  version: string,
  target: Target,
  options: { env?: Record<string, string | undefined>; log?: (line: string) => void } = {},
): string {
  const env = options.env ?? process.env;
  const base = join(packagesDir(env), target.name);
  const final = join(base, `${name.replace("/", "+")}@${version}`);
  const modules = join(final, "node_modules");
  if (existsSync(join(modules, name, "package.json"))) return modules;
  const npm = Bun.which("npm", { PATH: env.PATH ?? "" });
  if (!npm)
    throw new EmbedError(
      `${name}@${version} (the ${target.name} prebuilt) is not installed, and fetching it needs npm, which is not on PATH`,
    );
  options.log?.(`fetching ${name}@${version} for ${target.name} from the npm registry into ${base}`);
  mkdirSync(base, { recursive: true });
  const tmp = mkdtempSync(join(base, ".fetch-"));
  try {
    const platform = ["--os", target.os, "--cpu", target.arch, ...(target.os === "linux" ? ["--libc", "glibc"] : [])];
    // --force: npm refuses a package whose os/cpu is not this machine's, which is the point here.
    const r = Bun.spawnSync(
      [
        npm,
        "install",
        "--prefix",
        tmp,
        "--no-save",
        "--no-package-lock",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--force",
        ...platform,
        `${name}@${version}`,
      ],
      { env: { ...env, npm_config_update_notifier: "false" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" },
    );
    if (r.exitCode !== 0 || !existsSync(join(tmp, "node_modules", name, "package.json"))) {
      const said = (r.stderr.toString() + r.stdout.toString())
        .trim()
        .split("\n")
        .filter((l) => !l.includes("using --force"))
        .slice(-6)
        .join("\n");
      throw new EmbedError(
        `could not fetch ${name}@${version} (the ${target.name} prebuilt) from the npm registry (npm exit ${r.exitCode}):\n${said}`,
      );
    }
    try {
      renameSync(tmp, final);
    } catch (err) {
      if (!existsSync(join(modules, name, "package.json"))) throw err; // another build put it in place first otherwise
    }
    return modules;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
