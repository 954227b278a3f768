import { parseArgs } from "node:util";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { loadHandler } from "../worker/handler-loader.ts";

const WORKER_MAIN = resolve(import.meta.dir, "../worker/worker-main.ts");

/**
 * `spool build <handler.ts> --outfile PATH`: one executable that is a worker for that handler
 * (bun build --compile, bytecode for a fast start), needing no Bun and no node_modules.
 */
export async function buildCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: { outfile: { type: "string" } }, allowPositionals: true });
  const target = positionals[0];
  if (!target) {
    console.error("usage: spool build <handler.ts> --outfile PATH");
    return 2;
  }
  const handlerPath = resolve(target);
  await loadHandler(handlerPath); // fail early, with a clear message, on a file that is no handler
  const outfile = resolve(values.outfile ?? basename(target).replace(/\.[^.]+$/, ""));
  const dir = mkdtempSync(join(tmpdir(), "spool-build-"));
  try {
    const entry = join(dir, "worker-entry.ts");
    await Bun.write(
      entry,
      `import handler from ${JSON.stringify(handlerPath)};\n` +
        `import { workerMain } from ${JSON.stringify(WORKER_MAIN)};\n` +
        `const args = process.argv.slice(2);\n` +
        `workerMain(handler, args, args).then((code) => process.exit(code), (err) => {\n` +
        `  console.error(\`worker: \${err?.message ?? err}\`);\n  process.exit(1);\n});\n`,
    );
    // ESM bytecode: handlers may use import.meta; bytecode makes the start fast.
    const proc = Bun.spawn([process.execPath, "build", "--compile", "--bytecode", "--format=esm", "--minify", entry, "--outfile", outfile], {
      stdio: ["ignore", "inherit", "pipe"],
    });
    const errors = await new Response(proc.stderr).text();
    process.stderr.write(errors);
    const code = await proc.exited;
    // bun can print a bytecode failure and still exit 0 with a binary that does not start.
    if (code !== 0 || /error:/i.test(errors)) {
      console.error(`bun build --compile failed${code !== 0 ? ` (exit ${code})` : ""}; no working binary was made`);
      rmSync(outfile, { force: true });
      return code || 1;
    }
    console.log(`built ${outfile} (${(statSync(outfile).size / 1e6).toFixed(1)} MB)`);
    return 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
