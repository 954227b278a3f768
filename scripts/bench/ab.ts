#!/usr/bin/env bun
/**
 * A paired A/B of two versions of Spool on the queue benchmark's throughput runs: this checkout
 * or `--candidate DIR` (A) and another (B, `--baseline DIR`), each checkout with its node_modules,
 * each as `spool serve` on a fresh
 * embedded store with the same 4 worker processes and submit loops, at 4 workers × 1 (job-take)
 * and 4 workers × 8 (job-take-batch). Every round runs both, in turn, in the opposite order each
 * round, so that neither is always first on a machine whose speed drifts. It prints each round's
 * A/B ratio of jobs/s and of server CPU per job, then their medians and ranges, and a verdict:
 * a version wins only where it is ahead in every round (the difference is larger than the
 * rounds' spread); otherwise the two are even here, and the simpler one should stay.
 *
 *   bun scripts/bench/ab.ts --baseline DIR [--candidate DIR] [--rounds 10] [--jobs 10000] [--warm 5000] [--clients 16] [--batch 8]
 *       [--shapes 4x1,4xB]
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { spoolProcesses, type ProcessRun } from "./harness/queue-processes.ts";
import { f2 } from "./harness/queue-report.ts";
import { createQueueRig } from "./harness/queue-rig.ts";
import { median } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";

const USAGE =
  "usage: bun scripts/bench/ab.ts --baseline DIR [--candidate DIR] [--rounds 10] [--jobs 10000] [--warm 5000] [--clients 16] [--batch 8] [--shapes 4x1,4xB]";
const cli = benchCli("bench-ab", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    baseline: { type: "string" },
    candidate: { type: "string" },
    rounds: { type: "string", default: "10" },
    jobs: { type: "string", default: "10000" },
    warm: { type: "string", default: "5000" },
    clients: { type: "string", default: "16" },
    batch: { type: "string", default: "8" },
    shapes: { type: "string", default: "4x1,4xB" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
if (flags.baseline === undefined) cli.fail("--baseline DIR is required (the root of the other checkout)");
const checkout = (flag: "baseline" | "candidate", dir: string) => {
  const root = resolve(dir);
  if (!existsSync(join(root, "runtime/cli.ts"))) cli.fail(`--${flag} ${dir} has no runtime/cli.ts (give the root of a checkout)`);
  return root;
};
const BASELINE = checkout("baseline", flags.baseline!);
const CANDIDATE = flags.candidate === undefined ? undefined : checkout("candidate", flags.candidate);
const ROUNDS = cli.int("rounds", flags.rounds!, 2);
const SHAPES = flags.shapes!.split(",");
for (const s of SHAPES)
  if (s !== "4x1" && s !== "4xB") cli.fail(`--shapes takes 4x1 and 4xB (4 workers taking batches of --batch), got ${s}`);
const BATCH = cli.int("batch", flags.batch!);
const rig = createQueueRig({
  jobs: cli.int("jobs", flags.jobs!),
  warm: cli.int("warm", flags.warm!, 0),
  clients: cli.int("clients", flags.clients!),
  runsync: 1,
});
const cleanup = exitCleanup(rig.close, { onExit: rig.killAll });

const rate = (r: ProcessRun) => r.jobs / r.seconds;
const cpuUs = (r: ProcessRun) => (r.serverCpuS / r.jobs) * 1e6;

/** Which version the rounds favour: one wins only when it is ahead in every round. */
function verdict(ratios: number[], higherIsBetter: boolean): string {
  const [lo, hi] = [Math.min(...ratios), Math.max(...ratios)];
  if (lo > 1) return higherIsBetter ? "A wins in every round" : "B wins in every round";
  if (hi < 1) return higherIsBetter ? "B wins in every round" : "A wins in every round";
  return "even: the difference is within the rounds' spread";
}

async function main(): Promise<void> {
  console.log(
    `A: ${CANDIDATE ?? resolve(import.meta.dir, "../..")}\nB: ${BASELINE}\n${ROUNDS} rounds; machine: ${machineLine(machine(), { ram: true, load: true })}\n`,
  );
  const shapes = [
    { name: "4x1", label: "4 workers × 1 (job-take)", workers: 4, size: null },
    { name: "4xB", label: `4 workers × ${BATCH} (job-take-batch)`, workers: 4, size: BATCH },
  ].filter((sh) => SHAPES.includes(sh.name));
  const runs = new Map(shapes.map((sh) => [sh.name, [] as { a: ProcessRun; b: ProcessRun }[]]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const sh of shapes) {
      const a = () =>
        spoolProcesses(rig, {
          ...sh,
          shape: sh.name,
          ...(CANDIDATE ? { as: { system: "Spool baseline" as const, root: CANDIDATE } } : {}),
        });
      const b = () => spoolProcesses(rig, { ...sh, shape: sh.name, as: { system: "Spool baseline", root: BASELINE } });
      const pair = round % 2 ? { a: await a(), b: await b() } : { b: await b(), a: await a() };
      runs.get(sh.name)!.push(pair);
      console.log(
        `  round ${round}, ${sh.label}: A ${rate(pair.a).toFixed(1)} jobs/s, B ${rate(pair.b).toFixed(1)} jobs/s, A/B ${f2(rate(pair.a) / rate(pair.b))}`,
      );
    }
  }
  console.log("");
  const rows: string[][] = [];
  for (const sh of shapes) {
    const pairs = runs.get(sh.name)!;
    const speed = pairs.map((p) => rate(p.a) / rate(p.b));
    const cpu = pairs.map((p) => cpuUs(p.a) / cpuUs(p.b));
    rows.push([
      sh.label,
      median(pairs.map((p) => rate(p.a))).toFixed(1),
      median(pairs.map((p) => rate(p.b))).toFixed(1),
      `**${f2(median(speed))}**`,
      `${f2(Math.min(...speed))} to ${f2(Math.max(...speed))}`,
      verdict(speed, true),
      `**${f2(median(cpu))}**`,
      `${f2(Math.min(...cpu))} to ${f2(Math.max(...cpu))}`,
      verdict(cpu, false),
    ]);
  }
  printTable(
    ["workers × concurrency", "A jobs/s", "B jobs/s", "A/B jobs/s", "range", "jobs/s", "A/B server CPU µs/job", "range", "CPU"],
    "lrrrllrll",
    rows,
  );
  console.log(`\nmedians of ${ROUNDS} rounds; each round: ${rig.settings.jobs} jobs timed after ${rig.settings.warm} untimed`);
}

await runBench("bench-ab", main, cleanup, rig.outputs);
