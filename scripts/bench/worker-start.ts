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
 *   bun scripts/bench/worker-start.ts [--runs 20]
 *
 * It prints figures; it asserts only that every run reached job-take and that no process was left.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { outputTail, drain } from "./harness/pipes.ts";
import { exitedWithin, killGroup, stopGroup } from "./harness/processes.ts";
import { buildWorkerBinary } from "./harness/spool-build.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";
import { startRecorder, WORKER_START_ENDPOINT, type Run } from "./harness/worker-start-recorder.ts";

/** The environment every worker gets: nothing but a PATH. */
const MIN_ENV = { PATH: "/usr/bin:/bin" };
/** A run that has not reached job-take after this long fails the benchmark. */
const RUN_TIMEOUT_MS = 10_000;
/** After SIGTERM, how long a worker may take to exit before SIGKILL. */
const KILL_AFTER_MS = 2_000;

const cli = benchCli("bench-worker-start", "usage: bun scripts/bench/worker-start.ts [--runs 20]");
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: { runs: { type: "string", default: "20" }, help: { type: "boolean", short: "h" } },
});
if (flags.help) cli.help();
const RUNS = cli.int("runs", flags.runs);

const tmpRoot = makeTempDir("spool-bench-start-");
/** Every worker is spawned detached (setsid): its pid is the id of a group holding it and its child. */
const live = new Set<Bun.Subprocess>();
let forcedKills = 0;
const recorder = startRecorder(KILL_AFTER_MS);
const cleanup = exitCleanup(async () => {
  for (const proc of [...live]) killGroup(proc.pid, "SIGKILL");
  await Promise.all([...live].map((p) => exitedWithin(p, KILL_AFTER_MS)));
  live.clear();
  removeDir(tmpRoot);
  recorder.stop();
});

/**
 * SIGTERM to the worker (the supervisor passes it on to its child), SIGKILL to the whole group
 * after KILL_AFTER_MS; then waits until no process of the group is left. Returns ms to exit.
 */
async function stopWorker(proc: Bun.Subprocess): Promise<number> {
  try {
    const r = await stopGroup(proc, { killAfterMs: KILL_AFTER_MS, pollMs: 5, afterKillMs: 50 });
    forcedKills += r.forcedKills;
    return r.exitMs;
  } finally {
    live.delete(proc);
  }
}

interface Variant {
  label: string;
  cmd: string[];
  cwd: string;
  startMs: number[];
  firstRequestMs: number[];
  stopMs: number[];
}

async function oneRun(v: Variant, record: boolean): Promise<void> {
  const run: Run = recorder.arm();
  const out = outputTail(8_192); // the last 8 KB a worker wrote, for the error report of a run that fails
  const t0 = performance.now();
  const proc = Bun.spawn(v.cmd, { cwd: v.cwd, env: MIN_ENV, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  live.add(proc);
  void drain(proc.stdout, out.add);
  void drain(proc.stderr, out.add);
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
      throw new Error(`${v.label}: ${(e as Error).message}\n--- worker output (tail)\n${out.text()}`);
    } finally {
      clearTimeout(timer);
    }
    // The run stays armed until the worker is gone: its later requests are its own, not strays.
    stopMs = await stopWorker(proc);
  } finally {
    recorder.disarm(run);
  }
  if (!record) return;
  v.startMs.push(takeAt - t0);
  v.firstRequestMs.push(run.firstRequestAt! - t0);
  v.stopMs.push(stopMs);
}

const f1 = (n: number) => n.toFixed(1);

async function main(): Promise<void> {
  const t0 = performance.now();
  const info = machineLine(machine());
  console.log(`spool worker start benchmark: ${RUNS} runs per variant, spawn -> first GET job-take`);
  console.log(`machine: ${info}\n`);

  // The binary lives, and runs, in a directory of its own with no node_modules around it.
  const binDir = join(tmpRoot, "bin");
  const binary = join(binDir, "echo-worker");
  const { sizeMB, buildS } = await buildWorkerBinary("handlers/examples/echo.ts", binary);
  for (let d = binDir; d !== "/"; d = join(d, "..")) {
    if (existsSync(join(d, "node_modules"))) console.log(`note: ${join(d, "node_modules")} exists above the binary`);
  }
  console.log(`build: ${binary} ${f1(sizeMB)} MB in ${f1(buildS)} s\n`);

  const args = ["--url", recorder.url, "--endpoint", WORKER_START_ENDPOINT, "--api-key", "k"];
  const variant = (label: string, cmd: string[], cwd: string): Variant => ({
    label,
    cmd,
    cwd,
    startMs: [],
    firstRequestMs: [],
    stopMs: [],
  });
  const source = [process.execPath, "runtime/cli.ts", "worker", "handlers/examples/echo.ts", ...args, "--no-supervise"];
  const variants = [
    variant("binary, supervised (as users run it)", ["./echo-worker", ...args], binDir),
    variant("binary, --no-supervise", ["./echo-worker", ...args, "--no-supervise"], binDir),
    variant("source: bun runtime/cli.ts worker echo.ts --no-supervise", source, REPO_ROOT),
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
  recorder.assertNoStrays("after the runs");

  const startRows = variants.map((v) => {
    const s = summarize(v.startMs);
    return [v.label, String(s.n), `**${f1(s.p50)}**`, f1(s.p95), f1(s.min), f1(s.max)];
  });
  printTable(["worker start: spawn -> first GET job-take", "n", "p50 ms", "p95 ms", "min ms", "max ms"], "lrrrrr", startRows);
  console.log("");
  const sameRows = variants.map((v) => {
    const [r, s] = [summarize(v.firstRequestMs), summarize(v.stopMs)];
    return [v.label, f1(r.p50), f1(s.p50), f1(s.max)];
  });
  printTable(["same runs", "first request of any kind, p50 ms", "SIGTERM -> exit, p50 ms", "SIGTERM -> exit, max ms"], "lrrr", sameRows);
  console.log("");
  console.log(`binary: ${f1(sizeMB)} MB, built in ${f1(buildS)} s (bun build --compile --bytecode --minify)`);
  console.log(`machine: ${info}; workers run with env PATH=/usr/bin:/bin only, the binary from a dir with no node_modules`);
  console.log(`runs interleaved after one warm-up each; SIGKILLs needed: ${forcedKills}; total ${f1((performance.now() - t0) / 1000)} s`);
}

await runBench("bench-worker-start", main, cleanup);
