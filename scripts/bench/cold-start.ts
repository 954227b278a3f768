#!/usr/bin/env bun
/**
 * Cold start benchmark: from zero workers to the first /runsync answer, through the real scaler.
 *
 * Builds handlers/examples/echo.ts with `spool build`, then starts `spool serve` in a process of
 * its own with one endpoint `cold` (workersMin 0, workersMax 1, idleTimeout 1 s, QUEUE_DELAY)
 * whose scaler starts local worker processes. Per try it waits, polling GET /v2/cold/health,
 * until the scaler has stopped the idle worker (idle + running + initializing == 0), then times
 *   - cold: POST /v2/cold/runsync {"input":{"try":i}} until it answers COMPLETED;
 *   - warm: the same again at once, the worker still up.
 * Variants (each on a fresh server and data dir, one after the other, never overlapping):
 *   - the built binary, scaleIntervalMs 50 (so the scaler's cadence hardly counts);
 *   - the built binary, scaleIntervalMs 1000 (the default), to show what the cadence costs;
 *   - the handler as a source file (`bun runtime/cli.ts worker echo.ts`), scaleIntervalMs 50.
 * Each variant starts with one unrecorded cold try (the first start after the server came up).
 * After zero workers, each try pauses a random 0..scaleIntervalMs before its request, so that it
 * lands at a random point of the scaler's cycle rather than just after the tick that stopped the
 * previous worker (which would always be the worst case: nearly a whole interval to wait).
 * "request -> spawn" is when the server's "started worker" log line reached this process.
 * The servers and the tries live in scripts/bench/harness/cold-start-variant.ts.
 *
 *   bun scripts/bench/cold-start.ts [--tries 20] [--other-tries 10]
 *
 * It prints figures; it asserts only that every job completed, that each cold try started exactly
 * one worker, and that no process of a server's group was left behind.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { coldServers, ENDPOINT, HEALTH_POLL_MS, IDLE_TIMEOUT_S, runVariant, type Variant } from "./harness/cold-start-variant.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine } from "./harness/machine.ts";
import { buildWorkerBinary } from "./harness/spool-build.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const FAST_INTERVAL_MS = 50;
const DEFAULT_INTERVAL_MS = 1000;

const cli = benchCli("bench-cold-start", "usage: bun scripts/bench/cold-start.ts [--tries 20] [--other-tries 10]");
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    tries: { type: "string", default: "20" },
    "other-tries": { type: "string", default: "10" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) cli.help();
const TRIES = cli.int("tries", flags.tries);
const OTHER_TRIES = cli.int("other-tries", flags["other-tries"]);

const tmpRoot = makeTempDir("spool-bench-cold-");
const servers = coldServers(tmpRoot);
const cleanup = exitCleanup(async () => {
  await servers.stopAll();
  removeDir(tmpRoot);
});

const f1 = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "n/a" : n.toFixed(1));

async function main(): Promise<void> {
  const t0 = performance.now();
  console.log(`spool cold start benchmark: zero workers -> first POST /v2/${ENDPOINT}/runsync answer (COMPLETED)`);
  console.log(
    `endpoint: workersMin 0, workersMax 1, idleTimeout ${IDLE_TIMEOUT_S} s, QUEUE_DELAY; ` +
      `scaleIntervalMs ${FAST_INTERVAL_MS} (and the default ${DEFAULT_INTERVAL_MS} for comparison)\n`,
  );

  const binary = join(tmpRoot, "bin", "echo-worker");
  const { sizeMB, buildS } = await buildWorkerBinary("handlers/examples/echo.ts", binary);
  console.log(`build: ${binary} ${f1(sizeMB)} MB in ${f1(buildS)} s\n`);

  const variant = (label: string, name: string, handler: string, scaleIntervalMs: number, tries: number): Variant => ({
    label,
    name,
    handler,
    scaleIntervalMs,
    tries,
    cold: [],
    toSpawn: [],
    spawnToAnswer: [],
    warm: [],
    scaleDown: [],
  });
  const variants = [
    variant("binary", "binary-fast", binary, FAST_INTERVAL_MS, TRIES),
    variant("binary", "binary-default", binary, DEFAULT_INTERVAL_MS, OTHER_TRIES),
    variant(
      "source (bun cli.ts worker echo.ts)",
      "source-fast",
      join(REPO_ROOT, "handlers/examples/echo.ts"),
      FAST_INTERVAL_MS,
      OTHER_TRIES,
    ),
  ];
  for (const [i, v] of variants.entries()) {
    const tv = performance.now();
    await runVariant(servers, v, t0, i > 0);
    const c = summarize(v.cold);
    console.log(
      `  ${v.label}, scaleIntervalMs ${v.scaleIntervalMs}: cold p50 ${f1(c.p50)} ms, p95 ${f1(c.p95)} ms ` +
        `(${c.n} tries, ${f1((performance.now() - tv) / 1000)} s)`,
    );
  }
  console.log("");

  const head = [
    "handler",
    "scaleIntervalMs",
    "n",
    "cold p50 ms",
    "cold p95 ms",
    "cold min ms",
    "cold max ms",
    "warm p50 ms",
    "warm p95 ms",
    "first cold ms",
  ];
  const rows = variants.map((v) => {
    const [c, w] = [summarize(v.cold), summarize(v.warm)];
    return [
      v.label,
      String(v.scaleIntervalMs),
      String(c.n),
      `**${f1(c.p50)}**`,
      f1(c.p95),
      f1(c.min),
      f1(c.max),
      f1(w.p50),
      f1(w.p95),
      f1(v.first),
    ];
  });
  printTable(head, "lrrrrrrrrr", rows);
  console.log("");
  const split = variants.map((v) => {
    const [a, b, d] = [summarize(v.toSpawn), summarize(v.spawnToAnswer), summarize(v.scaleDown)];
    return [
      v.label,
      String(v.scaleIntervalMs),
      `${f1(a.p50)} / ${f1(a.max)}`,
      `${f1(b.p50)} / ${f1(b.max)}`,
      `${f1(d.p50)} / ${f1(d.max)}`,
    ];
  });
  const splitHead = [
    "cold try, split (p50 / max ms)",
    "scaleIntervalMs",
    "request -> scaler spawns worker",
    "spawn -> answer",
    "last answer -> zero workers",
  ];
  printTable(splitHead, "lrrrr", split);
  console.log("");
  const m = machine();
  printTable(["machine", ""], "ll", [
    ["nproc", m.nproc],
    ["CPU", m.cpu],
    ["bun", m.bun],
    ["platform", m.platform],
  ]);
  console.log("");
  console.log(`binary: ${f1(sizeMB)} MB, built in ${f1(buildS)} s. "first cold" is each server's first try (unrecorded in n).`);
  console.log(`warm: a second runsync at once after each cold one, the worker still up. "request -> scaler spawns worker"`);
  console.log(`is when the server's "started worker" log line reached this process; "last answer -> zero workers" is the`);
  console.log(
    `wait before a try (idleTimeout ${IDLE_TIMEOUT_S} s + the scaler's cadence + the worker's exit), polled every ${HEALTH_POLL_MS} ms;`,
  );
  console.log(`then a random 0..scaleIntervalMs pause, so each cold request lands at a random point of the scaler's cycle.`);
  console.log(
    `one server at a time, in its own process group; SIGKILLs needed: ${servers.forcedKills()}; total ${f1((performance.now() - t0) / 1000)} s`,
  );
}

await runBench("bench-cold-start", main, cleanup);
