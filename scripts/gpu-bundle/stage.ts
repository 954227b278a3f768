/**
 * Lays out, unpacked, what one GPU check bundle runs: Bun, the spool server bundled into
 * JavaScript, one handler's worker bundled with its native files, the check program, the tiny
 * model, and the script the scaler starts as the endpoints' handler.
 */
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { makeTinyFlux } from "../../handlers/image/tiny-model/make-tiny-flux.ts";
import { writeTinyGguf } from "../../handlers/text/tiny-gguf.ts";
import { nativePlugin, type NativeParts } from "../../runtime/build/native-plugin.ts";
import { hostTarget, type Target } from "../../runtime/build/targets.ts";
import { workerEntry } from "../../runtime/cli/build-command.ts";
import { BUNDLE_TARGET, LAYOUT, type BundlePart } from "./layout.ts";

const ROOT = resolve(import.meta.dir, "../..");

async function bundle(label: string, options: Parameters<typeof Bun.build>[0]): Promise<void> {
  const result = await Bun.build({ target: "bun", minify: true, throw: false, ...options });
  if (!result.success) throw new Error(`bundling ${label} failed:\n${result.logs.map((l) => String(l.message ?? l)).join("\n")}`);
}

/** Writes the unpacked bundle of `part` into `dir` (empty or missing). Throws when a piece cannot be made. */
export async function stagePart(part: BundlePart, dir: string, log: (line: string) => void = console.log): Promise<void> {
  const target: Target = hostTarget();
  if (target.name !== BUNDLE_TARGET)
    throw new Error(
      `the GPU machine is ${BUNDLE_TARGET} and the bundle carries this machine's Bun, but this machine is ${target.name}: build the bundle on a ${BUNDLE_TARGET} machine`,
    );
  mkdirSync(join(dir, "bin"), { recursive: true });
  copyFileSync(process.execPath, join(dir, LAYOUT.bun));
  chmodSync(join(dir, LAYOUT.bun), 0o755);

  log(`  ${part.name}: bundling the server, the ${part.handler} worker and the check`);
  await bundle("the server", { entrypoints: [join(ROOT, "runtime/cli.ts")], outdir: join(dir, LAYOUT.serverDir) });

  const entryDir = join(dir, ".entry");
  mkdirSync(entryDir);
  const entry = join(entryDir, "worker.ts");
  writeFileSync(entry, workerEntry(join(ROOT, part.handler)));
  let parts: NativeParts | undefined;
  await bundle(part.handler, {
    entrypoints: [entry],
    outdir: join(dir, LAYOUT.workerDir),
    format: "esm",
    naming: { entry: "[name].[ext]", asset: "assets/[name]-[hash].[ext]" },
    // A compiled build inlines these for its target; this bundle is for the same platform.
    define: { "process.platform": JSON.stringify(target.os), "process.arch": JSON.stringify(target.arch) },
    plugins: [
      nativePlugin({
        projectRoot: ROOT,
        target,
        gpu: part.gpu,
        onDone: (p) => (parts = p),
        onWarning: (m) => log(`  warning: ${m}`),
        onProgress: (m) => log(`  ${m}`),
      }),
    ],
  });
  const nativeBytes = (parts?.files ?? []).reduce((sum, f) => sum + f.size, 0);
  log(`  ${part.name}: worker with ${parts?.files.length ?? 0} native files (${(nativeBytes / 1e6).toFixed(1)} MB unpacked)`);
  await bundle("the check", { entrypoints: [join(import.meta.dir, "check.ts")], outdir: dir, naming: { entry: "[name].[ext]" } });
  rmSync(entryDir, { recursive: true, force: true });

  // The scaler starts a handler that is no source file as it is; this one runs the bundle with
  // the Bun beside it, found from its own path (a worker's environment is an allow-list).
  writeFileSync(
    join(dir, LAYOUT.workerCommand),
    `#!/bin/sh\nhere=\${0%/*}\nexec "$here/../${LAYOUT.bun}" "$here/../${LAYOUT.workerDir}/worker.js" "$@"\n`,
  );
  chmodSync(join(dir, LAYOUT.workerCommand), 0o755);

  if (part.name === "image") await makeTinyFlux(join(dir, LAYOUT.flux), { variant: "schnell", precision: "fp16" });
  else writeTinyGguf(join(dir, LAYOUT.gguf));
}
