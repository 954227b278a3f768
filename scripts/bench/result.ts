#!/usr/bin/env bun
/**
 * What a worker's result costs the store, by the size of the job's input: both stores
 * in-process (the embedded one on a temp dir, Redis on a throwaway redis-server with AOF), one
 * job at a time, jobs with and without a webhook. For each result (finish) it measures this
 * process's CPU and, on Redis, how long the result's script held Redis (INFO commandstats): every
 * other call of every server waits that long behind it. The input is what grows; the output
 * stays small (`--output N`: N characters of it), so the figures show what a result does with an
 * input it never needs.
 * `--baseline DIR` runs the same against the stores of another checkout, in the same rounds.
 *
 *   bun scripts/bench/result.ts [--sizes 1000,100000,1000000] [--output 0] [--jobs 30] [--rounds 3] [--baseline DIR]
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Store } from "../../runtime/server/store/store.ts";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { startRedis, type RedisProcess } from "./harness/redis-process.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const USAGE = "usage: bun scripts/bench/result.ts [--sizes 1000,100000,1000000] [--output 0] [--jobs 30] [--rounds 3] [--baseline DIR]";
const cli = benchCli("bench-result", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    sizes: { type: "string", default: "1000,100000,1000000" },
    output: { type: "string", default: "0" },
    jobs: { type: "string", default: "30" },
    rounds: { type: "string", default: "3" },
    baseline: { type: "string" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
const SIZES = flags
  .sizes!.split(",")
  .filter(Boolean)
  .map((n) => cli.int("sizes", n));
const JOBS = cli.int("jobs", flags.jobs!);
/** The result: { ok: true }, or { text } of this many characters. */
const OUTPUT_CHARS = cli.int("output", flags.output!, 0);
const OUTPUT = OUTPUT_CHARS > 0 ? { text: "o".repeat(OUTPUT_CHARS) } : { ok: true };
const ROUNDS = cli.int("rounds", flags.rounds!);
const WARM = 10;
const BASELINE = flags.baseline === undefined ? undefined : resolve(flags.baseline);
if (BASELINE !== undefined && !existsSync(join(BASELINE, "runtime/server/store/create-store.ts")))
  cli.fail(`--baseline ${flags.baseline} is not a checkout of Spool`);

const retention = { syncMs: 60_000, asyncMs: 1_800_000 };
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const dirs: string[] = [];
let redis: RedisProcess | undefined;
const cleanup = exitCleanup(async () => {
  await redis?.stop();
  dirs.forEach(removeDir);
});

/** A fresh store, and what removes its data once it is closed. */
type Open = (kind: "embedded" | "redis") => Promise<{ store: Store; clear: () => Promise<void> }>;
/** Each store on Redis gets a key prefix of its own. */
let prefixes = 0;

/** Opens fresh stores of the checkout at `root` (its own modules). */
async function opener(root: string): Promise<Open> {
  const { SqliteStore } = await import(
    join(
      root,
      existsSync(join(root, "runtime/server/store/sqlite/sqlite-store.ts"))
        ? "runtime/server/store/sqlite/sqlite-store.ts"
        : "runtime/server/store/sqlite-store.ts",
    )
  );
  const { RedisStore } = await import(join(root, "runtime/server/store/redis/redis-store.ts"));
  return async (kind) => {
    if (kind === "redis") {
      const store = await RedisStore.connect(redis!.url, { retention }, `{bench-result-${++prefixes}}:`);
      return { store, clear: async () => void (await redis!.client.send("FLUSHALL", [])) };
    }
    const dir = makeTempDir("spool-bench-result-");
    return { store: SqliteStore.open(dir, { retention }), clear: async () => removeDir(dir) };
  };
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
async function scriptUs(): Promise<number> {
  const text = (await redis!.client.send("INFO", ["commandstats"])) as string;
  return Number(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m.exec(text)?.[1] ?? 0);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Cell {
  cpu: number[];
  held: number[];
}

/** WARM + JOBS jobs of `bytes` input characters through a fresh store: each submitted, taken, then finished alone while measured. */
async function run(open: Open, kind: "embedded" | "redis", bytes: number, webhook: boolean, cell: Cell): Promise<void> {
  Bun.gc(true); // what the cell before left is not collected in this one's window
  const { store, clear } = await open(kind);
  const input = { prompt: "i".repeat(bytes) };
  const now = Date.now();
  try {
    for (let i = 0; i < WARM + JOBS; i++) {
      const id = `job-${i}`;
      await store.enqueue(
        { id, endpointId: "ep", input, webhook: webhook ? "http://127.0.0.1:9/hook" : undefined, policy, sync: false },
        now,
      );
      await store.claim("ep", "w", 1, now);
      const h0 = kind === "redis" ? await scriptUs() : 0;
      const c0 = cpuUs();
      if (!(await store.finish("w", id, { output: OUTPUT }, false, now + 1))) throw new Error(`${kind}: job ${id} was not finished`);
      const c1 = cpuUs();
      const h1 = kind === "redis" ? await scriptUs() : 0;
      if (i >= WARM) {
        cell.cpu.push(c1 - c0);
        if (kind === "redis") cell.held.push(h1 - h0);
      }
    }
  } finally {
    await store.close();
    await clear(); // each cell on an empty Redis and a fresh file
  }
}

async function main(): Promise<void> {
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(
    `spool result benchmark: ${JOBS} results per cell after ${WARM} untimed, ${ROUNDS} rounds, stores in-process, one job at a time; results of ${OUTPUT_CHARS || "a few"} characters`,
  );
  const tmp = makeTempDir("spool-bench-result-redis-");
  dirs.push(tmp);
  redis = await startRedis(tmp);
  const systems = [
    { name: "this checkout", open: await opener(REPO_ROOT) },
    ...(BASELINE ? [{ name: "baseline", open: await opener(BASELINE) }] : []),
  ];
  const shapes = (["embedded", "redis"] as const).flatMap((kind) =>
    [false, true].flatMap((webhook) => SIZES.map((bytes) => ({ kind, webhook, bytes }))),
  );
  const cells = new Map<string, Cell>();
  const cell = (system: string, s: (typeof shapes)[number]) => {
    const key = `${system}/${s.kind}/${s.webhook}/${s.bytes}`;
    if (!cells.has(key)) cells.set(key, { cpu: [], held: [] });
    return cells.get(key)!;
  };
  for (let round = 1; round <= ROUNDS; round++) {
    // Every other round the other checkout goes first.
    for (const sys of round % 2 ? systems : [...systems].reverse()) {
      for (const s of shapes) await run(sys.open, s.kind, s.bytes, s.webhook, cell(sys.name, s));
      console.log(`  round ${round}: ${sys.name} done`);
    }
  }
  const head = ["store", "webhook", "input chars", "result CPU µs", "script held Redis µs"];
  if (BASELINE) head.push("baseline CPU µs", "baseline held µs", "CPU ÷ baseline");
  console.log(`\n### A worker's result by the size of the job's input (medians of ${JOBS * ROUNDS} results)\n`);
  printTable(
    head,
    "llrrrrrr".slice(0, head.length),
    shapes.map((s) => {
      const now = cell("this checkout", s);
      const row = [
        s.kind,
        s.webhook ? "yes" : "no",
        String(s.bytes),
        `**${median(now.cpu).toFixed(0)}**`,
        s.kind === "redis" ? `**${median(now.held).toFixed(0)}**` : "—",
      ];
      if (BASELINE) {
        const base = cell("baseline", s);
        row.push(
          median(base.cpu).toFixed(0),
          s.kind === "redis" ? median(base.held).toFixed(0) : "—",
          `**${(median(now.cpu) / median(base.cpu)).toFixed(2)}**`,
        );
      }
      return row;
    }),
  );
  console.log(`\nmachine: ${info}`);
  console.log(
    "CPU is this process's user+system time around one result; Redis's hold is the evalsha time INFO commandstats adds over it (AOF on;",
  );
  console.log("the time Redis then spends writing the script's changes to the AOF is not in it).");
}

await runBench("bench-result", main, cleanup);
