import { join } from "node:path";
import { drain, lineSplitter, outputTail } from "./pipes.ts";
import { killGroup } from "./processes.ts";

/** The repository root (where runtime/cli.ts is). */
export const REPO_ROOT = join(import.meta.dir, "../../..");

/** A running `spool serve`, ready: it listens and its API key is known. */
export interface SpoolProcess {
  name: string;
  url: string;
  key: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** What the server wrote so far (for error reports). */
  output: () => string;
}

export interface SpoolOptions {
  /** Names the server in errors and output. */
  name: string;
  dataDir: string;
  configPath: string;
  /** A store URL (`--store`), e.g. a Redis URL to share. */
  store?: string;
  /** An API key the store already has (a server only prints a key when it creates the first one). */
  key?: string;
  /** The checkout whose `runtime/cli.ts serve` runs (another clone: a baseline in the same run). @default REPO_ROOT */
  root?: string;
  /** The spool CLI entry that runs `serve` (a bundled `cli.js`). @default `<root>/runtime/cli.ts` */
  cli?: string;
  /** Runs this script instead of `spool serve` (a reference server that prints "listening on <url>"; give `key`); `store` is passed on as `--store`, the data dir as `--data`. */
  script?: string;
  /** Lead a new process group, which the workers its scaler spawns join. @default false */
  detached?: boolean;
  /** @default REPO_ROOT */
  cwd?: string;
  /** @default 15000 */
  readyTimeoutMs?: number;
  /** Called per stderr line (the JSON log), with performance.now() of the piece it came in. */
  onStderrLine?: (line: string, at: number) => void;
}

/** Starts `spool serve --port 0` and waits until it prints its URL and (unless given) its key. */
export async function startSpool(opts: SpoolOptions): Promise<SpoolProcess> {
  const { name } = opts;
  const store = opts.store ? ["--store", opts.store] : [];
  const args = ["serve", "--port", "0", "--data", opts.dataDir, "--config", opts.configPath, ...store];
  // SPOOL_BENCH_SERVER_FLAGS: extra bun flags for the servers, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof".
  const flags = (process.env.SPOOL_BENCH_SERVER_FLAGS ?? "").split(" ").filter(Boolean);
  const command = opts.script
    ? [opts.script, ...store, "--data", opts.dataDir]
    : [opts.cli ?? join(opts.root ?? REPO_ROOT, "runtime/cli.ts"), ...args];
  const proc = Bun.spawn([process.execPath, ...flags, ...command], {
    cwd: opts.cwd ?? opts.root ?? REPO_ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: opts.detached ?? false,
    // As `npm run serve` starts the server (README, "Storage and durability").
    env: { ...process.env, MIMALLOC_PURGE_DELAY: process.env.MIMALLOC_PURGE_DELAY ?? "-1" },
  });
  let out = "";
  const err = outputTail();
  const server: SpoolProcess = {
    name,
    url: "",
    key: opts.key ?? "",
    proc,
    output: () => `--- ${name} stdout\n${out}--- ${name} stderr (tail)\n${err.text()}`,
  };

  const ready = Promise.withResolvers<void>();
  const check = () => {
    const key = opts.key ?? /created one named "default"[^\n]*\n\s*\n?\s*(\S+)\s*\n/.exec(out)?.[1];
    const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
    if (key && url) {
      server.key = key;
      server.url = url;
      ready.resolve();
    }
  };
  void drain(proc.stdout, (s) => {
    if (out.length < 100_000) out += s;
    if (!server.url) check();
  });
  const onLine = opts.onStderrLine;
  let at = 0;
  const lines = onLine ? lineSplitter((line) => onLine(line, at)) : undefined;
  void drain(proc.stderr, (s) => {
    at = performance.now();
    err.add(s);
    lines?.(s);
  });
  void proc.exited.then((code) => ready.reject(new Error(`server ${name} exited with ${code} before it was ready`)));
  const timeoutMs = opts.readyTimeoutMs ?? 15_000;
  const timer = setTimeout(() => ready.reject(new Error(`server ${name} not ready after ${timeoutMs / 1000} s`)), timeoutMs);
  try {
    await ready.promise;
  } catch (e) {
    // Not ready: no process of it is left behind (its group too, where it leads one).
    if (opts.detached) killGroup(proc.pid, "SIGKILL");
    else proc.kill("SIGKILL");
    throw new Error(`${(e as Error).message}\n${server.output()}`);
  } finally {
    clearTimeout(timer);
  }
  return server;
}
