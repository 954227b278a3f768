#!/usr/bin/env bun
/**
 * Queue benchmark. Spool servers run as `spool serve` in separate processes (so this client does
 * not share a server's event loop); this process runs the submitters. It measures
 *   - embedded store beside BullMQ: end-to-end jobs/s of no-op jobs with 4 worker processes
 *     taking one job at a time and 4 taking batches (Spool's over HTTP, BullMQ's Workers in
 *     processes of their own on a fresh redis-server with AOF, same run), as the ratio
 *     Spool/BullMQ, with the server's CPU per job (from /proc);
 *   - embedded store under a backlog: submit jobs/s and job-take + job-done latency with 1k,
 *     10k and 100k jobs queued, and the server's RSS;
 *   - embedded store by payload size: server CPU and latency of run -> take -> done -> status with
 *     1 KB, 100 KB and 1 MB in each job's input and in its result;
 *   - /runsync round-trip latency over an instant job (p50/p99) beside an authenticated 404;
 *   - Redis store (protocol workers in this process): a throwaway redis-server (AOF on, appendfsync everysec) and the same
 *     scenarios on 1 server and on 2 servers sharing it (workers and submitters spread over both
 *     URLs), then the same jobs through BullMQ on the same redis-server with the same number of
 *     workers and the same concurrency, printed as the ratio Spool/BullMQ; the payload sizes
 *     as on the embedded store, with redis-server's CPU per job; plus an untimed pass under
 *     MONITOR that counts Redis round trips per job for each.
 * Each scenario gets fresh servers on a fresh data dir or Redis key prefix, so the counts in
 * /health are exact. The scenarios live in scripts/bench/queue-*.ts.
 *
 *   bun scripts/bench/queue.ts [--mode embedded|redis|all] [--store embedded|redis]
 *       [--jobs 20000] [--warm 10000] [--runsync 500] [--clients 16] [--batch 8] [--profile 200]
 *       [--backlog 1000,10000,100000] [--submits 2000] [--takes 300] [--payload 1000,100000,1000000]
 *       [--rounds 3] [--baseline DIR] [--floor]
 *
 * `--baseline DIR` runs Spool from another checkout (its own node_modules installed) in the same
 * rounds, with the same workers and submitters: a before-and-after that the machine's drift from
 * hour to hour does not blur. With `--mode redis` both run, `--rounds` times, per shape on 1 and
 * 2 servers on the same redis-server (and the baseline gets a MONITOR pass of its own). `--floor` runs the protocol floor the same way (a bare Bun.serve
 * with the queue in memory: see bench/protocol-floor-server.ts), the least any server speaking
 * this protocol over HTTP costs here, and the durable floor (the same server with its queue in
 * SQLite, WAL and group commit as the embedded store, each answer after its COMMIT: the least a
 * server that promises what the embedded store promises costs here). Both print a table of their
 * own beside the BullMQ one.
 * With `--mode redis`, `--floor` runs the floor with its queue on the same redis-server (one
 * command a step, no script) beside Spool's Redis store and BullMQ, for each shape; then one and
 * two floor servers sharing their queue through Redis (the least a second server costs here).
 * `--jobs` and `--warm` are the timed and the untimed jobs of each throughput run, beside BullMQ's
 * worker processes and on Redis: the untimed jobs keep the server's JIT compilation out of the
 * timed window, which a short warm-up does not on a machine running 10,000 jobs a second.
 * `--store redis` is `--mode redis`. It prints figures; it asserts only that every job it
 * submitted completed. To profile the servers it starts, pass bun flags for them in
 * SPOOL_BENCH_SERVER_FLAGS, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof" (one file per server).
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { bullThroughput, redisAndBullVersions } from "./harness/queue-bullmq.ts";
import { profile } from "./harness/queue-monitor.ts";
import { f1, f2, printLatency, printProfiles, printRatios, printRedisFloor, printThroughput, rate } from "./harness/queue-report.ts";
import { createQueueRig } from "./harness/queue-rig.ts";
import { floorLatency, runsyncLatency, spoolThroughput, type Latency } from "./harness/queue-spool.ts";
import { backlogRuns, type BacklogRun } from "./harness/queue-backlog.ts";
import { bullProcesses, spoolProcesses, type ProcessRun } from "./harness/queue-processes.ts";
import { printBacklog, printReferences, printSideBySide } from "./harness/queue-side-by-side.ts";
import { payloadRuns, printPayload, type PayloadRun } from "./harness/queue-payload.ts";
import { printRedisBaseline, redisBaselineRounds } from "./harness/queue-redis-baseline.ts";
import type { Throughput } from "./harness/queue-timing.ts";

const USAGE =
  "usage: bun scripts/bench/queue.ts [--mode embedded|redis|all] [--store embedded|redis] [--jobs 20000] [--warm 10000] [--runsync 500]\n" +
  "                                  [--clients 16] [--batch 8] [--profile 200 (jobs under MONITOR; 0 skips)]\n" +
  "                                  [--backlog 1000,10000,100000] [--submits 2000] [--takes 300] [--payload 1000,100000,1000000]\n" +
  "                                  [--rounds 3 (Spool then BullMQ per round, worker processes)]\n" +
  "                                  [--baseline DIR (Spool of another checkout in the same rounds)] [--floor (the protocol and durable floors too)]";
const cli = benchCli("bench-queue", USAGE);

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    mode: { type: "string" },
    store: { type: "string" },
    jobs: { type: "string", default: "20000" },
    warm: { type: "string", default: "10000" },
    runsync: { type: "string", default: "500" },
    clients: { type: "string", default: "16" },
    backlog: { type: "string", default: "1000,10000,100000" },
    submits: { type: "string", default: "2000" },
    takes: { type: "string", default: "300" },
    payload: { type: "string", default: "1000,100000,1000000" },
    rounds: { type: "string", default: "3" },
    batch: { type: "string", default: "8" },
    profile: { type: "string", default: "200" },
    baseline: { type: "string" },
    floor: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) cli.help();
const JOBS = cli.int("jobs", flags.jobs);
const WARM = cli.int("warm", flags.warm, 0);
const RUNSYNC = cli.int("runsync", flags.runsync);
const CLIENTS = cli.int("clients", flags.clients);
const BATCH = cli.int("batch", flags.batch);
const PROFILE = cli.int("profile", flags.profile, 0);
const BACKLOG = flags
  .backlog!.split(",")
  .filter(Boolean)
  .map((n) => cli.int("backlog", n));
const SUBMITS = cli.int("submits", flags.submits);
const ROUNDS = cli.int("rounds", flags.rounds);
const PAYLOAD = flags
  .payload!.split(",")
  .filter(Boolean)
  .map((n) => cli.int("payload", n));
const TAKES = cli.int("takes", flags.takes);
/** Another checkout of Spool (with its node_modules) run in the same rounds as a baseline. */
const BASELINE = flags.baseline === undefined ? undefined : resolve(flags.baseline);
if (BASELINE !== undefined && !existsSync(join(BASELINE, "runtime/cli.ts")))
  cli.fail(`--baseline ${flags.baseline} has no runtime/cli.ts (give the root of another checkout)`);
const MODES = ["embedded", "redis", "all"] as const;
type Mode = (typeof MODES)[number];
if (flags.mode !== undefined && flags.store !== undefined && flags.mode !== flags.store) {
  cli.fail(`--mode ${flags.mode} and --store ${flags.store} disagree`);
}
const MODE = (flags.mode ?? flags.store ?? "all") as Mode;
if (!MODES.includes(MODE)) cli.fail(`--mode must be one of ${MODES.join(", ")}, got ${MODE}`);
if (flags.store !== undefined && flags.store !== "embedded" && flags.store !== "redis") {
  cli.fail(`--store must be embedded or redis, got ${flags.store}`);
}

const rig = createQueueRig({ jobs: JOBS, warm: WARM, clients: CLIENTS, runsync: RUNSYNC });
const cleanup = exitCleanup(rig.close, {
  onSignal: (sig) => console.error(`bench-queue: ${sig}, stopping the servers and redis-server`),
  // Last resort (an exit before cleanup ran): no child and no temp dir outlives this process.
  onExit: rig.killAll,
});

async function main(): Promise<void> {
  const t0 = performance.now();
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(
    `spool queue benchmark (mode ${MODE}): ${JOBS} no-op jobs per throughput run, ${CLIENTS} submit loops; ${RUNSYNC} runsync calls`,
  );
  console.log(`machine: ${info}\n`);

  const onRedis: Throughput[] = [];
  let redisBaseline: Throughput[] = [];
  const lat: Latency[] = [];
  let redisInfo = "";
  const profiles: Parameters<typeof printProfiles>[0] = [];
  const log = (r: Throughput) => {
    const where = r.system !== "BullMQ" ? `, ${r.servers} server${r.servers > 1 ? "s" : ""}` : "";
    console.log(`  ${r.system}${where}, ${r.label}: ${f1(rate(r))} jobs/s`);
  };

  const shapes = [
    { label: "1 worker × 1 (job-take)", name: "w1", workers: 1, size: null, concurrency: 1 },
    { label: "4 workers × 1 (job-take)", name: "w4", workers: 4, size: null, concurrency: 1 },
    { label: `4 workers × ${BATCH} (job-take-batch, batch_size=${BATCH})`, name: "w4-batch", workers: 4, size: BATCH, concurrency: BATCH },
  ] as const;

  const sideBySide: ProcessRun[] = [];
  const backlog: BacklogRun[] = [];
  let payload: PayloadRun[] = [];
  let redisPayload: PayloadRun[] = [];
  const processShapes = [
    { name: "4x1", label: "4 workers × 1 (Spool job-take)", workers: 4, size: null, concurrency: 1 },
    { name: `4x${BATCH}`, label: `4 workers × ${BATCH} (Spool job-take-batch of ${BATCH})`, workers: 4, size: BATCH, concurrency: BATCH },
  ];
  if (MODE !== "redis") {
    const redis = await rig.startRedis();
    redisInfo = await redisAndBullVersions(rig);
    console.log(`embedded store beside BullMQ (${redisInfo}), worker processes:`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const sh of processShapes) {
        // Every system runs once a round; even rounds run them in the opposite order, so that
        // none is always first (or always right after BullMQ) on a machine whose speed drifts.
        const steps: (() => Promise<ProcessRun>)[] = [
          () => spoolProcesses(rig, { ...sh, shape: sh.name }),
          ...(BASELINE ? [() => spoolProcesses(rig, { ...sh, shape: sh.name, as: { system: "Spool baseline", root: BASELINE } })] : []),
          ...(flags.floor
            ? (["protocol floor", "durable floor"] as const).map(
                (system) => () => spoolProcesses(rig, { ...sh, shape: sh.name, as: { system } }),
              )
            : []),
          async () => {
            await redis.client.send("FLUSHALL", []);
            return bullProcesses(rig, { ...sh, shape: sh.name });
          },
        ];
        const done: ProcessRun[] = [];
        for (const step of round % 2 ? steps : [...steps].reverse()) done.push(await step());
        const [sp, ...refs] = round % 2 ? done : done.reverse();
        const bu = refs.pop()!;
        sideBySide.push(sp!, ...refs, bu);
        const others = refs.map((r) => `, ${r.system} ${f1(r.jobs / r.seconds)} jobs/s`).join("");
        console.log(
          `  round ${round}, ${sh.label}: Spool ${f1(sp!.jobs / sp!.seconds)} jobs/s${others}, BullMQ ${f1(bu.jobs / bu.seconds)} jobs/s`,
        );
      }
    }
    console.log("embedded store under a backlog:");
    for (const b of await backlogRuns(rig, BACKLOG, SUBMITS, TAKES)) {
      backlog.push(b);
      console.log(
        `  ${b.queued} queued: submit ${f1(b.submitPerSecond)} jobs/s, take+done p50 ${f2(b.takeDone.p50)} ms, RSS ${f1(b.rssMiB)} MiB`,
      );
    }
    console.log("embedded store by payload size:");
    // About 6 MB carried per size (at least 20 jobs): the 1 MB row is as long as the 1 KB one.
    payload = await payloadRuns(rig, PAYLOAD, (bytes) => Math.max(20, Math.min(300, Math.round(3e6 / bytes))));
    for (const p of payload)
      console.log(`  ${p.bytes} bytes: ${p.cpuUs.toFixed(0)} µs server CPU per job, cycle p50 ${f2(p.cycle.p50)} ms`);
    const l = await runsyncLatency(rig, false);
    lat.push(...l);
    console.log(`  runsync: p50 ${f2(l[0]!.p50)} ms, p99 ${f2(l[0]!.p99)} ms\n`);
    if (flags.floor) lat.push(await floorLatency(rig));
  }

  if (MODE !== "embedded") {
    const redis = rig.redis ?? (await rig.startRedis());
    redisInfo = await redisAndBullVersions(rig);
    console.log(`Redis store and BullMQ on one ${redisInfo}, port ${redis.port}:`);
    for (const sh of shapes) {
      for (const servers of [1, 2]) {
        await redis.client.send("FLUSHALL", []);
        const r = await spoolThroughput(rig, { ...sh, name: `${sh.name}-s${servers}`, shape: sh.name, servers, redis: true });
        onRedis.push(r);
        log(r);
      }
      // The floor with its queue of one server (a take waiting on it is handed its job), then one and two servers sharing a queue.
      const floors = flags.floor
        ? [
            { servers: 1, shared: false },
            { servers: 1, shared: true },
            { servers: 2, shared: true },
          ]
        : [];
      for (const { servers, shared } of floors) {
        await redis.client.send("FLUSHALL", []);
        const name = `${sh.name}-floor${shared ? "-shared" : ""}-s${servers}`;
        const r = await spoolThroughput(rig, { ...sh, name, shape: sh.name, servers, redis: true, floor: true, shared });
        onRedis.push(r);
        log(r);
      }
      await redis.client.send("FLUSHALL", []);
      const label = sh.size === null ? sh.label : `${sh.workers} workers × ${sh.concurrency} (Worker concurrency ${sh.concurrency})`;
      const b = await bullThroughput(rig, { label, shape: sh.name, workers: sh.workers, concurrency: sh.concurrency });
      onRedis.push(b);
      log(b);
    }
    if (BASELINE) {
      console.log(`Redis store beside the baseline (${BASELINE}), ${ROUNDS} rounds:`);
      redisBaseline = await redisBaselineRounds(rig, shapes, ROUNDS, BASELINE, console.log);
    }
    console.log("Redis store by payload size:");
    redisPayload = await payloadRuns(rig, PAYLOAD, (bytes) => Math.max(20, Math.min(300, Math.round(3e6 / bytes))), true);
    for (const p of redisPayload)
      console.log(
        `  ${p.bytes} bytes: ${p.cpuUs.toFixed(0)} µs server CPU, ${p.redisCpuUs!.toFixed(0)} µs redis-server CPU per job, cycle p50 ${f2(p.cycle.p50)} ms`,
      );
    const l = await runsyncLatency(rig, true);
    lat.push(...l);
    console.log(`  runsync on Redis: p50 ${f2(l[0]!.p50)} ms, p99 ${f2(l[0]!.p99)} ms`);
    if (PROFILE > 0) {
      await redis.client.send("FLUSHALL", []);
      const w1 = shapes[0];
      const sp = await profile(redis, (probe) =>
        spoolThroughput(rig, { ...w1, name: "profile", servers: 1, redis: true, jobs: PROFILE, probe }),
      );
      profiles.push({ label: "Spool, 1 server, 1 worker × 1", ...sp });
      if (BASELINE) {
        await redis.client.send("FLUSHALL", []);
        const base = await profile(
          redis,
          (probe) => spoolThroughput(rig, { ...w1, name: "profile-base", servers: 1, redis: true, jobs: PROFILE, probe, root: BASELINE }),
          BASELINE,
        );
        profiles.push({ label: "Spool baseline, 1 server, 1 worker × 1", ...base });
      }
      const bp = await profile(redis, (probe) =>
        bullThroughput(rig, { label: w1.label, shape: "profile", workers: 1, concurrency: 1, jobs: PROFILE, probe }),
      );
      profiles.push({ label: "BullMQ, 1 worker × 1", ...bp });
      console.log(`  MONITOR pass (${PROFILE} jobs each, untimed): done`);
    }
    console.log("");
  }

  if (sideBySide.length) {
    console.log(
      `### Embedded store (SQLite) beside BullMQ, worker processes of their own (${JOBS} no-op jobs timed after ${WARM} untimed, ${CLIENTS} submit loops; median of ${ROUNDS} rounds)\n`,
    );
    printSideBySide(sideBySide, processShapes);
    printReferences(sideBySide, processShapes);
  }
  if (backlog.length) {
    console.log(
      `### Embedded store under a backlog (${SUBMITS} submissions by ${CLIENTS} loops and ${TAKES} take+done by one worker per depth, in 3 rounds across the depths; submit rate: median of the rounds)\n`,
    );
    printBacklog(backlog);
  }
  if (payload.length) {
    console.log(
      "### Embedded store by payload size (one client: run -> job-take -> job-done -> status, the same size in input and result)\n",
    );
    printPayload(payload);
  }
  if (onRedis.length) {
    console.log(`### Redis store vs BullMQ on the same Redis (${JOBS} no-op jobs timed after ${WARM} untimed)\n`);
    printThroughput(onRedis, true);
    printRatios(onRedis, shapes, BATCH);
    if (flags.floor) printRedisFloor(onRedis, shapes);
  }
  if (redisBaseline.length) {
    console.log(
      `### Redis store beside the baseline ${BASELINE} (${JOBS} no-op jobs timed after ${WARM} untimed; median of ${ROUNDS} rounds)\n`,
    );
    printRedisBaseline(redisBaseline, shapes);
  }
  if (redisPayload.length) {
    console.log("### Redis store by payload size (one client: run -> job-take -> job-done -> status, the same size in input and result)\n");
    printPayload(redisPayload);
  }
  if (profiles.length) printProfiles(profiles, PROFILE);
  if (lat.length) printLatency(lat);
  console.log(`machine: ${info}${redisInfo ? `; ${redisInfo}` : ""}`);
  console.log(
    `Spool servers run in their own processes and the submit loops (${CLIENTS}) in this one. Beside BullMQ, Spool's protocol workers`,
  );
  console.log(
    "(HTTP job-take -> job-done) and BullMQ's Workers each run in 4 processes of their own; in the Redis-store table both run in this process.",
  );
  const submitNote = onRedis.length ? `"submit-only jobs/s" is the rate submissions were answered while the workers drained; ` : "";
  console.log(`${submitNote}CPU is user+system over the timed window, per job (other processes from /proc, 10 ms ticks).`);
  if (onRedis.length) console.log("Redis commands/job counts commands inside scripts too (INFO commandstats).");
  console.log(`total ${f1((performance.now() - t0) / 1000)} s`);
}

await runBench("bench-queue", main, cleanup, rig.outputs);
