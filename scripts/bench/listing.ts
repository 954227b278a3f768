#!/usr/bin/env bun
/**
 * What a /requests page costs by how many jobs are retained: the store's listing (what the route
 * calls), in-process, for 20 jobs without a status and with each status, on an endpoint holding
 * 1k and 100k jobs (1 in 40 FAILED, the rest COMPLETED, 20 running, 20 queued). Prints the
 * median time of a page per row; a listing that costs the page, not the history, stays flat
 * from 1k to 100k. A listing the store did not answer (past the Redis store's 10 s limit) says so.
 *
 * `--baseline DIR` runs the same rows on the stores of another checkout too, on stores of their
 * own, in the same process.
 *
 *   bun scripts/bench/listing.ts [--retained 1000,100000] [--store embedded,redis] [--reads 200] [--baseline DIR]
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { JobStatus } from "../../runtime/protocol/limits.ts";
import type { NewJob, Store } from "../../runtime/server/store/store.ts";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { startRedis, type RedisProcess } from "./harness/redis-process.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const USAGE =
  "usage: bun scripts/bench/listing.ts [--retained 1000,100000] [--store embedded,redis] [--reads 200] [--baseline DIR (another checkout)]";
const cli = benchCli("bench-listing", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    retained: { type: "string", default: "1000,100000" },
    store: { type: "string", default: "embedded,redis" },
    reads: { type: "string", default: "200" },
    baseline: { type: "string" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
const RETAINED = flags
  .retained!.split(",")
  .filter(Boolean)
  .map((n) => cli.int("retained", n));
const STORES = flags.store!.split(",").filter(Boolean);
for (const s of STORES) if (s !== "embedded" && s !== "redis") cli.fail(`--store takes embedded and redis, got ${s}`);
const READS = cli.int("reads", flags.reads!);
const BASELINE = flags.baseline === undefined ? undefined : resolve(flags.baseline);

const PAGE = 20;
const LISTINGS: (JobStatus | undefined)[] = [undefined, "COMPLETED", "FAILED", "IN_PROGRESS", "IN_QUEUE"];
const T0 = Date.now();
const policy = { executionTimeout: 3_600_000, lowPriority: false, ttl: 86_400_000 };
const retention = { syncMs: 3_600_000, asyncMs: 3_600_000 };

const dir = makeTempDir("spool-bench-listing-");
let redis: RedisProcess | undefined;
const cleanup = exitCleanup(async () => {
  await redis?.stop();
  removeDir(dir);
});

/** A fresh store of the checkout at `root`. */
async function openStore(root: string, kind: string, name: string): Promise<Store> {
  if (kind === "embedded") {
    const { SqliteStore } = (await import(
      join(root, "runtime/server/store/sqlite/sqlite-store.ts")
    )) as typeof import("../../runtime/server/store/sqlite/sqlite-store.ts");
    return SqliteStore.open(join(dir, name), { retention });
  }
  redis ??= await startRedis(join(dir, "redis"));
  const { RedisStore } = (await import(
    join(root, "runtime/server/store/redis/redis-store.ts")
  )) as typeof import("../../runtime/server/store/redis/redis-store.ts");
  return RedisStore.connect(redis.url, { retention }, `{${name}}:`);
}

/** `n` jobs retained on endpoint ep: 1 in 40 FAILED, the rest COMPLETED, then 20 running and 20 queued. */
async function fill(store: Store, n: number): Promise<void> {
  const job = (id: string): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false });
  const BATCH = 500;
  for (let from = 0; from < n; from += BATCH) {
    const ids = Array.from({ length: Math.min(BATCH, n - from) }, (_, i) => `j${from + i}`);
    await Promise.all(ids.map((id) => store.enqueue(job(id), T0)));
    await store.claim("ep", "w", ids.length, T0);
    await Promise.all(ids.map((id, i) => store.finish("w", id, (from + i) % 40 === 0 ? { error: "boom" } : { output: 1 }, false, T0)));
  }
  for (let i = 0; i < 2 * PAGE; i++) await store.enqueue(job(`live${i}`), T0);
  await store.claim("ep", "w", PAGE, T0);
}

/**
 * Median microseconds of a page of each listing; NaN for one the store did not answer (a Redis
 * script that runs past the store's time limit). A listing slower than 100 ms is read 5 times.
 */
async function timePages(store: Store): Promise<number[]> {
  const medians: number[] = [];
  const page = async (status: JobStatus | undefined) => {
    const start = Bun.nanoseconds();
    await store.recent("ep", T0 + 1, PAGE, undefined, status);
    return (Bun.nanoseconds() - start) / 1000;
  };
  for (const status of LISTINGS) {
    try {
      const first = await page(status);
      const reads = first > 100_000 ? 5 : READS;
      if (first <= 100_000) for (let i = 0; i < 20; i++) await page(status); // warm
      const us: number[] = [];
      for (let i = 0; i < reads; i++) us.push(await page(status));
      medians.push(summarize(us).p50);
    } catch (err) {
      console.log(`${status ?? "(any)"}: ${(err as Error).message}`);
      medians.push(NaN);
    }
  }
  return medians;
}

async function main(): Promise<void> {
  console.log(`bench-listing: a page of ${PAGE} from the store's listing, median of ${READS} reads (us); ${machineLine(machine())}`);
  const checkouts: [string, string][] = [["this", REPO_ROOT], ...(BASELINE ? [["baseline", BASELINE] as [string, string]] : [])];
  const rows: string[][] = [];
  for (const kind of STORES) {
    const results: Record<string, number[][]> = {};
    for (const [label, root] of checkouts) {
      results[label] = [];
      for (const n of RETAINED) {
        const store = await openStore(root, kind, `${label}-${n}`);
        try {
          await fill(store, n);
          results[label]!.push(await timePages(store));
        } finally {
          await store.close();
        }
      }
    }
    LISTINGS.forEach((status, li) => {
      for (const [label] of checkouts) {
        const us = (v: number) => (Number.isNaN(v) ? "no answer" : v.toFixed(0));
        const cells = RETAINED.map((_, ri) => us(results[label]![ri]![li]!));
        const first = results[label]![0]![li]!;
        const last = results[label]![RETAINED.length - 1]![li]!;
        rows.push([kind, label, status ?? "(any)", ...cells, `x${(last / first).toFixed(2)}`]);
      }
    });
  }
  printTable(
    ["store", "code", "status", ...RETAINED.map((n) => `p50 at ${n} retained`), `${RETAINED.at(-1)} / ${RETAINED[0]}`],
    `lll${"r".repeat(RETAINED.length)}r`,
    rows,
  );
}

await runBench("bench-listing", main, cleanup, () => (redis ? [redis.output()] : []));
