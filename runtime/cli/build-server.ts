import { renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { compileTarget, type Target } from "../build/targets.ts";

const CLI = resolve(import.meta.dir, "../cli.ts");

/** Where a build writes before its binary is renamed into place (a failed build leaves an earlier one as it was). */
export const partialPath = (outfile: string) => join(dirname(outfile), `.${basename(outfile)}.partial-${process.pid}`);

/**
 * `spool build --server --outfile PATH`: the whole `spool` command (serve, keys, usage, cache,
 * doctor) as one executable that needs no Bun and no node_modules, with the dashboard's page and
 * the docs page's script inside it. It carries no model packages: its endpoints run built
 * workers (`handler` = a binary from `spool build <handler>`) or workers that connect themselves.
 */
export async function buildServer(outfile: string, platform: Target): Promise<number> {
  console.log(`building ${outfile}: the spool server and command, for ${platform.name}`);
  const partial = partialPath(outfile);
  try {
    const result = await Bun.build({
      entrypoints: [CLI],
      compile: { outfile: partial, autoloadDotenv: false, autoloadBunfig: false, ...compileTarget(platform) },
      target: "bun",
      minify: true,
      throw: false,
    });
    if (!result.success) {
      console.error(`spool build --server failed; no binary was made:\n${result.logs.map((l) => String(l.message ?? l)).join("\n")}`);
      return 1;
    }
    renameSync(partial, outfile);
  } finally {
    rmSync(partial, { force: true });
  }
  console.log(
    `built ${outfile} for ${platform.name} (${(statSync(outfile).size / 1e6).toFixed(1)} MB); run it as: ${outfile} serve --config FILE`,
  );
  return 0;
}
