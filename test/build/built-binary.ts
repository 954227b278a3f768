import { chmodSync, copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { spawnProcess, type Spawned } from "../helpers/spawned.ts";
import type { TestServer } from "../helpers/test-server.ts";

export const ROOT = resolve(import.meta.dir, "../..");
const CLI = join(ROOT, "runtime/cli.ts");

/** A handler built with `spool build` into a temp folder; disposing removes it. */
export interface Built extends Disposable {
  binary: string;
  /** What `spool build` printed (progress and the final line). */
  output: string;
}

/** Runs `spool build` on a handler (once per test file: builds are slow). */
export function buildHandler(handler: string, extra: string[] = []): Built {
  const dir = mkdtempSync(join(tmpdir(), "spool-built-"));
  const binary = join(dir, basename(handler).replace(/\.[^.]+$/, "") + "-worker");
  const r = Bun.spawnSync([process.execPath, CLI, "build", handler, "--outfile", binary, ...extra], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = r.stdout.toString() + r.stderr.toString();
  if (r.exitCode !== 0) throw new Error(`spool build ${handler} failed (exit ${r.exitCode}):\n${output}`);
  return { binary, output, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/** An empty folder holding only a copy of the binary; it is also the worker's HOME (so its cache is `<dir>/.cache/spool`). */
export interface Bare extends Disposable {
  dir: string;
  exe: string;
  cacheEntries(): string[];
  /** Starts the binary as `./name args` with nothing but PATH and HOME in its environment (`env -i`). */
  start(args: string[], env?: Record<string, string>): Spawned;
}

/** `runner`: a command that runs the binary (an emulator for another CPU's), before `./name`. */
export function bareCopy(binary: string, runner: string[] = []): Bare {
  const dir = mkdtempSync(join(tmpdir(), "spool-bare-"));
  const exe = join(dir, basename(binary));
  copyFileSync(binary, exe);
  chmodSync(exe, 0o755);
  const cache = join(dir, ".cache", "spool");
  return {
    dir,
    exe,
    cacheEntries: () =>
      readdirSync(cache)
        .filter((n) => n.startsWith("native-"))
        .map((n) => join(cache, n)),
    start: (args, env = {}) =>
      spawnProcess([...runner, `./${basename(binary)}`, ...args], { cwd: dir, env: { PATH: "/usr/bin:/bin", HOME: dir, ...env } }),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A worker's command-line flags for an endpoint of the test server. */
export const flags = (srv: TestServer, endpoint: string) => ["--url", srv.url, "--endpoint", endpoint, "--api-key", srv.key];

/** RunPod's worker environment contract (read by runtime/worker/worker-options.ts) for an endpoint of the test server. */
export function runpodEnv(srv: TestServer, endpoint: string, podId: string): Record<string, string> {
  const base = `${srv.url}/v2/${endpoint}`;
  return {
    RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID?gpu=test`,
    RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID?gpu=test`,
    RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=test`,
    RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID?gpu=test`,
    RUNPOD_POD_ID: podId,
    RUNPOD_AI_API_KEY: srv.key,
    RUNPOD_PING_INTERVAL: "10000",
  };
}
