import { Queue } from "bullmq";
import { join } from "node:path";
import { drain, outputTail } from "./pipes.ts";
import { ownCpu, processCpu } from "./process-cpu.ts";
import { stopProcess } from "./processes.ts";
import { queueClient } from "./queue-client.ts";
import type { QueueRig } from "./queue-rig.ts";

/** One side-by-side run: workers in processes of their own, submit loops in this process. */
export interface ProcessRun {
  /** Spool; BullMQ; Spool of another checkout (--baseline); the protocol floor and the durable floor (--floor). */
  system: "Spool" | "BullMQ" | "Spool baseline" | "protocol floor" | "durable floor";
  shape: string;
  jobs: number;
  seconds: number;
  /** CPU of the Spool server process (NaN for BullMQ). */
  serverCpuS: number;
  workersCpuS: number;
  benchCpuS: number;
  redisCpuS: number;
}

/** A worker process, ready (it printed "ready"). */
async function spawnReady(args: string[], name: string): Promise<Bun.Subprocess<"ignore", "pipe", "pipe">> {
  const proc = Bun.spawn([process.execPath, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const err = outputTail(5_000);
  void drain(proc.stderr, err.add);
  const ready = Promise.withResolvers<void>();
  let out = "";
  void drain(proc.stdout, (s) => {
    out += s;
    if (out.includes("ready")) ready.resolve();
  });
  void proc.exited.then((code) => ready.reject(new Error(`${name} exited with ${code} before it was ready:\n${err.text()}`)));
  const timer = setTimeout(() => ready.reject(new Error(`${name} not ready after 15 s:\n${err.text()}`)), 15_000);
  try {
    await ready.promise;
  } catch (e) {
    proc.kill("SIGKILL");
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return proc;
}

/** Runs `jobs` submissions through the rig's submit loops until `completed()` reaches `target`. */
async function drive(
  rig: QueueRig,
  jobs: number,
  target: number,
  submit: (i: number) => Promise<unknown>,
  completed: () => Promise<number>,
) {
  let next = 0;
  const loops = Array.from({ length: Math.min(rig.settings.clients, jobs) }, async () => {
    while (next < jobs) await submit(next++);
  });
  const submitted = Promise.all(loops);
  let failed: unknown;
  submitted.catch((e) => (failed = e));
  for (;;) {
    if (failed) throw failed;
    if ((await completed()) >= target) break;
    await Bun.sleep(5);
  }
  await submitted;
}

/**
 * Runs the rig's warm-up jobs untimed, then times `jobs` submissions through the rig's submit loops until
 * `completed()` counts them all (polled every 5 ms), with CPU readings of the given processes
 * around the timed window.
 */
async function timeRun(
  rig: QueueRig,
  jobs: number,
  submit: (i: number) => Promise<unknown>,
  completed: () => Promise<number>,
  pids: { server?: number; workers: number[] },
) {
  await Bun.sleep(200); // workers parked on their first take
  const warm = rig.settings.warm;
  await drive(rig, warm, warm, submit, completed);
  const cpu = () => ({
    server: pids.server === undefined ? NaN : processCpu(pids.server),
    workers: pids.workers.reduce((a, p) => a + processCpu(p), 0),
    bench: ownCpu(),
    redis: rig.redis ? processCpu(rig.redis.proc.pid) : NaN,
  });
  const c0 = cpu();
  const start = performance.now();
  await drive(rig, jobs, warm + jobs, submit, completed);
  const seconds = (performance.now() - start) / 1000;
  const c1 = cpu();
  return {
    seconds,
    serverCpuS: c1.server - c0.server,
    workersCpuS: c1.workers - c0.workers,
    benchCpuS: c1.bench - c0.bench,
    redisCpuS: c1.redis - c0.redis,
  };
}

/** The protocol floor's server (see protocol-floor-server.ts). */
export const FLOOR_SCRIPT = join(import.meta.dir, "protocol-floor-server.ts");

/**
 * Spool on a fresh embedded store: `workers` worker processes taking one job or batches of
 * `size`. `as` runs another server in its place, with the same workers and submitters: Spool
 * from another checkout (`root`), the protocol floor (its queue in memory), or the durable floor
 * (its queue in SQLite with group commit, each answer after its COMMIT).
 */
export async function spoolProcesses(
  rig: QueueRig,
  s: {
    shape: string;
    workers: number;
    size: number | null;
    jobs?: number;
    as?: { system: "Spool baseline"; root: string } | { system: "protocol floor" | "durable floor" };
  },
): Promise<ProcessRun> {
  const jobs = s.jobs ?? rig.settings.jobs;
  const other =
    s.as?.system === "Spool baseline"
      ? { root: s.as.root }
      : s.as
        ? { script: FLOOR_SCRIPT, key: "floor", store: s.as.system === "durable floor" ? "sqlite" : undefined }
        : {};
  const server = await rig.startServer(rig.unique(`p-${s.shape}`), other);
  const procs: Bun.Subprocess[] = [];
  try {
    const script = join(import.meta.dir, "queue-worker-process.ts");
    for (let i = 0; i < s.workers; i++) {
      procs.push(await spawnReady([script, server.url, server.key, `pw${i}-`, String(s.size ?? 0)], `worker process ${i}`));
    }
    const c = queueClient(server);
    const t = await timeRun(
      rig,
      jobs,
      (i) => c.run({ i }),
      async () => (await c.health()).jobs.completed,
      {
        server: server.proc.pid,
        workers: procs.map((p) => p.pid),
      },
    );
    const h = (await c.health()).jobs;
    const system = s.as?.system ?? "Spool";
    if (h.completed !== rig.settings.warm + jobs || h.failed || h.inQueue || h.inProgress)
      throw new Error(`${system} ${s.shape}: expected ${rig.settings.warm + jobs} completed, /health says ${JSON.stringify(h)}`);
    return { system, shape: s.shape, jobs, ...t };
  } finally {
    await Promise.all(procs.map((p) => stopProcess(p, 3_000)));
    await rig.stopServer(server);
  }
}

/** BullMQ on the rig's redis-server: `workers` Worker processes of `concurrency` each. */
export async function bullProcesses(
  rig: QueueRig,
  s: { shape: string; workers: number; concurrency: number; jobs?: number },
): Promise<ProcessRun> {
  const jobs = s.jobs ?? rig.settings.jobs;
  const name = rig.unique("bull");
  const connection = { host: "127.0.0.1", port: rig.redis!.port, maxRetriesPerRequest: null };
  const queue = new Queue(name, { connection });
  const procs: Bun.Subprocess[] = [];
  try {
    await queue.waitUntilReady();
    const script = join(import.meta.dir, "bull-worker-process.ts");
    for (let i = 0; i < s.workers; i++)
      procs.push(await spawnReady([script, String(rig.redis!.port), name, String(s.concurrency)], `BullMQ worker ${i}`));
    const t = await timeRun(
      rig,
      jobs,
      (i) => queue.add("noop", { i }),
      () => queue.getCompletedCount(),
      { workers: procs.map((p) => p.pid) },
    );
    const counts = await queue.getJobCounts("completed", "failed", "waiting", "active");
    if (counts.completed !== rig.settings.warm + jobs || counts.failed || counts.waiting || counts.active)
      throw new Error(`BullMQ ${s.shape}: expected ${rig.settings.warm + jobs} completed, counts ${JSON.stringify(counts)}`);
    return { system: "BullMQ", shape: s.shape, jobs, ...t };
  } finally {
    await Promise.all(procs.map((p) => stopProcess(p, 3_000)));
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
  }
}
