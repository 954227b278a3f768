import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { REPO_ROOT } from "./spool-process.ts";

/** Builds `handler` into a worker binary with `spool build`; returns its size and the build time. */
export async function buildWorkerBinary(handler: string, outfile: string): Promise<{ sizeMB: number; buildS: number }> {
  mkdirSync(dirname(outfile), { recursive: true });
  const t = performance.now();
  const build = Bun.spawn([process.execPath, "runtime/cli.ts", "build", handler, "--outfile", outfile], {
    cwd: REPO_ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, out, err] = await Promise.all([build.exited, new Response(build.stdout).text(), new Response(build.stderr).text()]);
  const buildS = (performance.now() - t) / 1000;
  if (code !== 0 || !existsSync(outfile)) throw new Error(`spool build failed (exit ${code})\n${out}${err}`);
  return { sizeMB: statSync(outfile).size / 1e6, buildS };
}
