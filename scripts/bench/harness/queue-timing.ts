import { ownCpu, processCpu } from "./process-cpu.ts";
import type { QueueRig } from "./queue-rig.ts";

/** One throughput run's figures. */
export interface Throughput {
  label: string;
  /** Which of the scenario shapes (worker count and concurrency) it ran. */
  shape: string;
  system: "Spool" | "Spool baseline" | "BullMQ" | "protocol floor" | "protocol floor, shared queue";
  /** Spool servers; 0 for BullMQ (in this process). */
  servers: number;
  workers: number;
  jobs: number;
  seconds: number;
  submitSeconds: number;
  /** CPU of the Spool server processes (all of them). */
  serverCpuS: number;
  /** CPU of this process: submitters and workers. */
  clientCpuS: number;
  redisCpuS: number;
  /** Commands Redis ran, those inside scripts included. */
  redisCommands: number;
}

/** What timeJobs measures; the rest of a Throughput is the scenario's. */
export type Timing = Pick<Throughput, "seconds" | "submitSeconds" | "serverCpuS" | "clientCpuS" | "redisCpuS" | "redisCommands">;

/** Called once the workers are parked (before the clock starts) and once every job is done. */
export interface Probe {
  begin(): Promise<void>;
  end(): Promise<void>;
}

type CommandStats = Map<string, number>;

async function commandStats(client: Bun.RedisClient): Promise<CommandStats> {
  const text = (await client.send("INFO", ["commandstats"])) as string;
  const stats: CommandStats = new Map();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(m[1]!, Number(m[2]));
  return stats;
}

/** Commands Redis ran between two snapshots (commands inside Lua scripts included), less ours. */
function commandsBetween(a: CommandStats, b: CommandStats): number {
  let total = 0;
  for (const [cmd, calls] of b) if (cmd !== "info") total += calls - (a.get(cmd) ?? 0);
  return total;
}

/** Before/after readings of CPU and Redis counters around a timed window. */
async function readings(rig: QueueRig, serverPids: number[]) {
  const redis = rig.redis;
  return {
    stats: redis ? await commandStats(redis.client) : undefined,
    server: serverPids.reduce((a, pid) => a + processCpu(pid), 0),
    client: ownCpu(),
    redis: redis ? processCpu(redis.proc.pid) : NaN,
  };
}

/** Jobs run through a system untimed before those counted under MONITOR (JIT tiers, connection pools, reservations); throughput runs take the rig's `warm`. */
export const WARM_UP_JOBS = 1000;

/**
 * A promise of the time the n-th job finished; tick() per job, fail() on the first error;
 * reached(k) settles once k jobs finished (or on the first error).
 */
export function countdown(n: number) {
  let done = 0;
  let failure: { e: unknown } | undefined;
  const all = Promise.withResolvers<number>();
  all.promise.catch(() => {}); // awaited later; a failure before then is not unhandled
  const waits: { k: number; resolve: () => void; reject: (e: unknown) => void }[] = [];
  return {
    promise: all.promise,
    tick: () => {
      done++;
      for (const w of waits.filter((w) => w.k === done)) w.resolve();
      if (done === n) all.resolve(performance.now());
    },
    fail: (e: unknown) => {
      failure ??= { e };
      all.reject(e);
      for (const w of waits) w.reject(e);
    },
    reached: (k: number) =>
      new Promise<void>((resolve, reject) => {
        if (failure) reject(failure.e);
        else if (done >= k) resolve();
        else waits.push({ k, resolve, reject });
      }),
  };
}

/** Runs submissions `from` to `to` - 1 through the rig's submit loops; resolves when all were answered. */
async function submitAll(rig: QueueRig, from: number, to: number, submit: (loop: number, i: number) => Promise<unknown>): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: Math.min(rig.settings.clients, to - from) }, async (_, k) => {
      while (next < to) await submit(k, next++);
    }),
  );
}

/**
 * Times `jobs` submissions through `clients` loops of `submit(loop, i)`, the workers already
 * started: lets them park on their first (empty) take, runs `warm` jobs untimed (allDone counts
 * warm + jobs), runs the probe's begin, and times from the first timed submission to `allDone`
 * with CPU and Redis readings around the window.
 */
export async function timeJobs(
  rig: QueueRig,
  opts: {
    jobs: number;
    warm: number;
    serverPids: number[];
    probe?: Probe;
    allDone: ReturnType<typeof countdown>;
    submit: (loop: number, i: number) => Promise<unknown>;
  },
): Promise<Timing> {
  const { jobs, warm, allDone } = opts;
  await Bun.sleep(200);
  if (warm > 0) {
    await submitAll(rig, 0, warm, opts.submit);
    await allDone.reached(warm);
    await Bun.sleep(100); // the workers park again
  }
  await opts.probe?.begin();

  const r0 = await readings(rig, opts.serverPids);
  const start = performance.now();
  const submitted = submitAll(rig, warm, warm + jobs, opts.submit).then(() => performance.now());
  submitted.catch(allDone.fail);
  const [end, submitEnd] = await Promise.all([allDone.promise, submitted]);
  const r1 = await readings(rig, opts.serverPids);
  await opts.probe?.end();
  return {
    seconds: (end - start) / 1000,
    submitSeconds: (submitEnd - start) / 1000,
    serverCpuS: r1.server - r0.server,
    clientCpuS: r1.client - r0.client,
    redisCpuS: r1.redis - r0.redis,
    redisCommands: r0.stats && r1.stats ? commandsBetween(r0.stats, r1.stats) : NaN,
  };
}
