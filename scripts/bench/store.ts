#!/usr/bin/env bun
/**
 * Embedded-store benchmark, in-process (no HTTP): what a job costs the store itself, by how many
 * requests arrive together. Each step submits C jobs at once, takes them (C claims at once) and
 * finishes them (C results at once), so group commit merges up to C writes per transaction; the
 * hand-off rows give each job straight to a waiting worker at submit (no claim), as a parked
 * job-take does. Prints, per shape, the median of the rounds: jobs/s, process CPU per job (the
 * checkpoint thread included), write system calls and KB written per job (/proc/self/io).
 *
 *   bun scripts/bench/store.ts [--jobs 20000] [--concurrency 1,4,16] [--rounds 3]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { SqliteStore } from "../../runtime/server/store/sqlite/sqlite-store.ts";
import type { NewJob } from "../../runtime/server/store/store.ts";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const USAGE = "usage: bun scripts/bench/store.ts [--jobs 20000] [--concurrency 1,4,16] [--rounds 3]";
const cli = benchCli("bench-store", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    jobs: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "1,4,16" },
    rounds: { type: "string", default: "3" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
const JOBS = cli.int("jobs", flags.jobs!);
const CONCURRENCY = flags
  .concurrency!.split(",")
  .filter(Boolean)
  .map((n) => cli.int("concurrency", n));
const ROUNDS = cli.int("rounds", flags.rounds!);
const WARM_JOBS = 2_000;

const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const retention = { syncMs: 60_000, asyncMs: 1_800_000 };
const dirs: string[] = [];
const cleanup = exitCleanup(async () => dirs.forEach(removeDir));

/** Write system calls and bytes written by this process so far. */
function written(): { calls: number; bytes: number } {
  const io = readFileSync("/proc/self/io", "utf8");
  return { calls: Number(/^syscw: (\d+)/m.exec(io)?.[1]), bytes: Number(/^wchar: (\d+)/m.exec(io)?.[1]) };
}
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

interface Run {
  jobsPerS: number;
  cpuUs: number;
  writes: number;
  kb: number;
}

/** `jobs` jobs through a fresh store, `c` at a time; the hand-off skips the claim. */
async function run(c: number, handOff: boolean): Promise<Run> {
  const dir = makeTempDir("spool-bench-store-");
  dirs.push(dir);
  const store = SqliteStore.open(dir, { retention });
  let n = 0;
  const steps = async (jobs: number) => {
    for (let i = 0; i < jobs; i += c) {
      const now = Date.now();
      const batch = Array.from({ length: c }, (_, k): [NewJob, string] => [
        { id: Bun.randomUUIDv7(), endpointId: "ep", input: { n: ++n }, policy, sync: false },
        `worker-${k}`,
      ]);
      await Promise.all(batch.map(([job, w]) => store.enqueue(job, now, 1_000_000, handOff ? w : undefined)));
      if (!handOff) await Promise.all(batch.map(([, w]) => store.claim("ep", w, 1, now)));
      await Promise.all(batch.map(([job, w]) => store.finish(w, job.id, { output: { ok: true } }, false, now)));
    }
  };
  await steps(WARM_JOBS);
  const [w0, c0, t0] = [written(), cpuUs(), performance.now()];
  await steps(JOBS);
  const [w1, c1, t1] = [written(), cpuUs(), performance.now()];
  await store.close();
  removeDir(dir);
  return {
    jobsPerS: JOBS / ((t1 - t0) / 1000),
    cpuUs: (c1 - c0) / JOBS,
    writes: (w1.calls - w0.calls) / JOBS,
    kb: (w1.bytes - w0.bytes) / 1024 / JOBS,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(
    `spool store benchmark: ${JOBS} jobs per run after ${WARM_JOBS} untimed, ${ROUNDS} rounds (median), embedded store in-process`,
  );
  const shapes = CONCURRENCY.flatMap((c) => [false, true].map((handOff) => ({ c, handOff })));
  const runs = new Map<string, Run[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const { c, handOff } of shapes) {
      const r = await run(c, handOff);
      const key = `${c}/${handOff}`;
      runs.set(key, [...(runs.get(key) ?? []), r]);
      console.log(
        `  round ${round}, ${c} at once, ${handOff ? "hand-off" : "take"}: ${r.jobsPerS.toFixed(0)} jobs/s, ${r.cpuUs.toFixed(1)} µs CPU/job`,
      );
    }
  }
  console.log(`\n### Embedded store per job, in-process (submit -> take -> done; hand-off: submit straight to a waiting worker -> done)\n`);
  printTable(
    ["requests at once", "path", "jobs/s", "CPU µs/job", "write system calls/job", "KB written/job"],
    "rlrrrr",
    shapes.map(({ c, handOff }) => {
      const rs = runs.get(`${c}/${handOff}`)!;
      const m = (f: (r: Run) => number, d: number) => median(rs.map(f)).toFixed(d);
      return [
        String(c),
        handOff ? "hand-off" : "take",
        m((r) => r.jobsPerS, 0),
        `**${m((r) => r.cpuUs, 1)}**`,
        m((r) => r.writes, 2),
        m((r) => r.kb, 1),
      ];
    }),
  );
  console.log(`\nmachine: ${info}`);
  console.log("CPU is this process's user+system time (the checkpoint thread included); writes from /proc/self/io.");
}

await runBench("bench-store", main, cleanup);
