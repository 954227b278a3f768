#!/usr/bin/env bun
/**
 * Worker start benchmark: how long from spawning a worker until it asks the queue for work.
 *
 * Builds handlers/examples/echo.ts with `spool build` (size and build time are printed), then
 * times, per run, the span from just before Bun.spawn to the arrival of the worker's first
 * GET /v2/bench/job-take/... at a tiny recording server inside this process (same process, so
 * both ends read the same clock). Variants:
 *   - the compiled binary as users run it (it supervises a child copy of itself);
 *   - the compiled binary with --no-supervise;
 *   - the source through `bun runtime/cli.ts worker ... --no-supervise`, for comparison.
 * The binary runs from a temp directory with no node_modules and PATH=/usr/bin:/bin only.
 * Runs are interleaved (a, b, c, a, b, c, ...) after one unrecorded warm-up run per variant.
 *
 *   bun scripts/bench-worker-start.ts [--runs 20]
 *
 * It prints figures; it asserts only that every run reached job-take and that no process was left.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const ROOT = join(import.meta.dir, "..");
const ENDPOINT = "bench";
/** The environment every worker gets: nothing but a PATH. */
const MIN_ENV = { PATH: "/usr/bin:/bin" };
/** A run that has not reached job-take after this long fails the benchmark. */
const RUN_TIMEOUT_MS = 10_000;
/** After SIGTERM, how long a worker may take to exit before SIGKILL. */
const KILL_AFTER_MS = 2_000;

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: { runs: { type: "string", default: "20" }, help: { type: "boolean", short: "h" } },
});
if (flags.help) {
  console.log("usage: bun scripts/bench-worker-start.ts [--runs 20]");
  process.exit(0);
}
const RUNS = Number(flags.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) {
  console.error(`bench-worker-start: --runs must be a positive integer, got ${flags.runs}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Processes and temp dirs, cleaned up on every exit path

const tmpRoot = mkdtempSync(join(tmpdir(), "spool-bench-start-"));
/** Every worker is spawned detached (setsid): its pid is the id of a group holding it and its child. */
const live = new Set<Bun.Subprocess>();
let forcedKills = 0;

const exitedWithin = (proc: Bun.Subprocess, ms: number) =>
  Promise.race([proc.exited.then(() => true), Bun.sleep(ms).then(() => false)]);

/** True while any process of the group `pgid` is still alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {}
}

/**
 * SIGTERM to the worker (the supervisor passes it on to its child), SIGKILL to the whole group
 * after KILL_AFTER_MS; then waits until no process of the group is left. Returns ms to exit.
 */
async function stopWorker(proc: Bun.Subprocess): Promise<number> {
  const t = performance.now();
  try {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      if (!(await exitedWithin(proc, KILL_AFTER_MS))) {
        forcedKills++;
        killGroup(proc.pid, "SIGKILL");
        await proc.exited;
      }
    }
    const exitedAt = performance.now();
    // The supervised child is in the same group; it must be gone too.
    const deadline = performance.now() + KILL_AFTER_MS;
    while (groupAlive(proc.pid)) {
      if (performance.now() > deadline) {
        forcedKills++;
        killGroup(proc.pid, "SIGKILL");
        await Bun.sleep(50);
        if (groupAlive(proc.pid)) throw new Error(`process group ${proc.pid} survived SIGKILL`);
        break;
      }
      await Bun.sleep(5);
    }
    return exitedAt - t;
  } finally {
    live.delete(proc);
  }
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  for (const proc of [...live]) killGroup(proc.pid, "SIGKILL");
  await Promise.all([...live].map((p) => exitedWithin(p, KILL_AFTER_MS)));
  live.clear();
  rmSync(tmpRoot, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// The recording server

interface Run {
  /** performance.now() when the first request of any kind arrived. */
  firstRequestAt?: number;
  firstTake: PromiseWithResolvers<number>;
  /** Resolved when the run is over: job-takes after the first are held open until then. */
  ended: PromiseWithResolvers<void>;
  requests: Record<string, number>;
}

let current: Run | null = null;
/** Requests that came while no run was armed (a worker left over from an earlier run). */
const strays: string[] = [];

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const at = performance.now();
    const path = new URL(req.url).pathname;
    if (!path.startsWith(`/v2/${ENDPOINT}/`)) return new Response("not found", { status: 404 });
    const kind = path.split("/")[3] ?? "";
    const run = current;
    if (!run) {
      strays.push(kind);
    } else {
      run.firstRequestAt ??= at;
      run.requests[kind] = (run.requests[kind] ?? 0) + 1;
    }
    switch (kind) {
      case "job-take":
        if (run?.requests["job-take"] === 1) {
          run.firstTake.resolve(at);
        } else if (run) {
          // Long-poll as the real server does, so the worker does not spin on 204s.
          await Promise.race([run.ended.promise, Bun.sleep(KILL_AFTER_MS)]);
        }
        return new Response(null, { status: 204 });
      case "ping":
        return new Response("");
      default: // job-stop, and anything else
        return new Response(null, { status: 204 });
    }
  },
});
const URL_ = `http://127.0.0.1:${server.port}`;

// ---------------------------------------------------------------------------------------------
// Runs

interface Variant {
  label: string;
  cmd: string[];
  cwd: string;
  startMs: number[];
  firstRequestMs: number[];
  stopMs: number[];
}

/** Keeps the last 8 KB a worker wrote, for the error report of a run that fails. */
async function tail(stream: ReadableStream<Uint8Array>, into: { text: string }): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    into.text += decoder.decode(chunk, { stream: true });
    if (into.text.length > 16_384) into.text = into.text.slice(-8_192);
  }
}

async function oneRun(v: Variant, record: boolean): Promise<void> {
  if (strays.length) throw new Error(`requests from a leftover worker arrived between runs: ${strays.join(", ")}`);
  const run: Run = { firstTake: Promise.withResolvers(), ended: Promise.withResolvers(), requests: {} };
  current = run;
  const out = { text: "" };
  const t0 = performance.now();
  const proc = Bun.spawn(v.cmd, { cwd: v.cwd, env: MIN_ENV, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  live.add(proc);
  void tail(proc.stdout, out);
  void tail(proc.stderr, out);
  let takeAt: number;
  let stopMs: number;
  try {
    let timer: Timer | undefined;
    try {
      takeAt = await Promise.race([
        run.firstTake.promise,
        proc.exited.then((code) => Promise.reject(new Error(`worker exited with ${code} before its first job-take`))),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no job-take after ${RUN_TIMEOUT_MS / 1000} s`)), RUN_TIMEOUT_MS);
        }),
      ]);
    } catch (e) {
      await stopWorker(proc).catch(() => {});
      throw new Error(`${v.label}: ${(e as Error).message}\n--- worker output (tail)\n${out.text}`);
    } finally {
      clearTimeout(timer);
    }
    // The run stays armed until the worker is gone: its later requests are its own, not strays.
    stopMs = await stopWorker(proc);
  } finally {
    current = null;
    run.ended.resolve();
  }
  if (!record) return;
  v.startMs.push(takeAt - t0);
  v.firstRequestMs.push(run.firstRequestAt! - t0);
  v.stopMs.push(stopMs);
}

// ---------------------------------------------------------------------------------------------
// Main

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
  return { n: s.length, p50: at(0.5), p95: at(0.95), min: s[0]!, max: s[s.length - 1]! };
}

function machine(): string {
  let nproc = String(navigator.hardwareConcurrency);
  try {
    const p = Bun.spawnSync(["nproc"]);
    if (p.exitCode === 0) nproc = p.stdout.toString().trim();
  } catch {}
  return `nproc ${nproc}, ${cpus()[0]?.model ?? "unknown CPU"}, bun ${Bun.version} (${Bun.revision.slice(0, 9)}), ${process.platform}-${process.arch}`;
}

const f1 = (n: number) => n.toFixed(1);

async function main(): Promise<void> {
  const t0 = performance.now();
  const info = machine();
  console.log(`spool worker start benchmark: ${RUNS} runs per variant, spawn -> first GET job-take`);
  console.log(`machine: ${info}\n`);

  // The binary lives, and runs, in a directory of its own with no node_modules around it.
  const binDir = join(tmpRoot, "bin");
  const binary = join(binDir, "echo-worker");
  const tb = performance.now();
  const build = Bun.spawn(
    [process.execPath, "runtime/cli.ts", "build", "handlers/examples/echo.ts", "--outfile", binary],
    { cwd: ROOT, stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const [code, bout, berr] = await Promise.all([build.exited, new Response(build.stdout).text(), new Response(build.stderr).text()]);
  const buildS = (performance.now() - tb) / 1000;
  if (code !== 0) throw new Error(`spool build failed (exit ${code})\n${bout}${berr}`);
  const sizeMB = statSync(binary).size / 1e6;
  for (let d = binDir; d !== "/"; d = join(d, "..")) {
    if (existsSync(join(d, "node_modules"))) console.log(`note: ${join(d, "node_modules")} exists above the binary`);
  }
  console.log(`build: ${binary} ${f1(sizeMB)} MB in ${f1(buildS)} s\n`);

  const args = ["--url", URL_, "--endpoint", ENDPOINT, "--api-key", "k"];
  const variant = (label: string, cmd: string[], cwd: string): Variant => ({ label, cmd, cwd, startMs: [], firstRequestMs: [], stopMs: [] });
  const variants = [
    variant("binary, supervised (as users run it)", ["./echo-worker", ...args], binDir),
    variant("binary, --no-supervise", ["./echo-worker", ...args, "--no-supervise"], binDir),
    variant("source: bun runtime/cli.ts worker echo.ts --no-supervise", [process.execPath, "runtime/cli.ts", "worker", "handlers/examples/echo.ts", ...args, "--no-supervise"], ROOT),
  ];

  for (const v of variants) await oneRun(v, false); // warm-up: page cache, bun's transpiler cache
  for (let i = 0; i < RUNS; i++) {
    for (const v of variants) await oneRun(v, true);
    if (performance.now() - t0 > 55_000) {
      console.log(`note: stopping after ${i + 1} rounds to stay near 60 s`);
      break;
    }
  }
  await Bun.sleep(100);
  if (strays.length) throw new Error(`requests from a leftover worker arrived after the runs: ${strays.join(", ")}`);

  console.log("| worker start: spawn -> first GET job-take | n | p50 ms | p95 ms | min ms | max ms |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const v of variants) {
    const s = stats(v.startMs);
    console.log(`| ${v.label} | ${s.n} | **${f1(s.p50)}** | ${f1(s.p95)} | ${f1(s.min)} | ${f1(s.max)} |`);
  }
  console.log("");
  console.log("| same runs | first request of any kind, p50 ms | SIGTERM -> exit, p50 ms | SIGTERM -> exit, max ms |");
  console.log("|---|---:|---:|---:|");
  for (const v of variants) {
    const r = stats(v.firstRequestMs);
    const s = stats(v.stopMs);
    console.log(`| ${v.label} | ${f1(r.p50)} | ${f1(s.p50)} | ${f1(s.max)} |`);
  }
  console.log("");
  console.log(`binary: ${f1(sizeMB)} MB, built in ${f1(buildS)} s (bun build --compile --bytecode --minify)`);
  console.log(`machine: ${info}; workers run with env PATH=/usr/bin:/bin only, the binary from a dir with no node_modules`);
  console.log(`runs interleaved after one warm-up each; SIGKILLs needed: ${forcedKills}; total ${f1((performance.now() - t0) / 1000)} s`);
}

try {
  await main();
} catch (e) {
  console.error(`bench-worker-start failed: ${(e as Error).stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanup();
  server.stop(true);
}
