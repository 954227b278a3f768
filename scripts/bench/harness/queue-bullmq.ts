import { Queue, Worker } from "bullmq";
import type { QueueRig } from "./queue-rig.ts";
import { countdown, timeJobs, WARM_UP_JOBS, type Probe, type Throughput } from "./queue-timing.ts";

/**
 * The same job flow through BullMQ on the rig's redis-server: `workers` Workers (in this
 * process) of `concurrency` each with a no-op processor, the rig's submit loops of queue.add,
 * timed from the first add to the last 'completed' event. Completed jobs are kept, as Spool
 * keeps them.
 */
export async function bullThroughput(
  rig: QueueRig,
  s: { label: string; shape: string; workers: number; concurrency: number; jobs?: number; probe?: Probe },
): Promise<Throughput> {
  const jobs = s.jobs ?? rig.settings.jobs;
  const name = rig.unique("bench");
  const connection = { host: "127.0.0.1", port: rig.redis!.port, maxRetriesPerRequest: null };
  const queue = new Queue(name, { connection });
  const ws: Worker[] = [];
  try {
    const warm = s.probe ? WARM_UP_JOBS : rig.settings.warm;
    const allDone = countdown(warm + jobs);
    for (let i = 0; i < s.workers; i++) {
      const w = new Worker(name, async () => ({ ok: true }), { connection, concurrency: s.concurrency });
      w.on("completed", allDone.tick);
      w.on("failed", (job, err) => allDone.fail(new Error(`BullMQ job ${job?.id} failed: ${err.message}`)));
      w.on("error", allDone.fail);
      ws.push(w);
    }
    await Promise.all([queue.waitUntilReady(), ...ws.map((w) => w.waitUntilReady())]);
    const timing = await timeJobs(rig, { jobs, warm, serverPids: [], probe: s.probe, allDone, submit: (_, i) => queue.add("noop", { i }) });

    const counts = await queue.getJobCounts("completed", "failed", "waiting", "active", "delayed");
    if (counts.completed !== warm + jobs || counts.failed || counts.waiting || counts.active || counts.delayed) {
      throw new Error(`${s.label}: expected ${warm + jobs} completed, BullMQ counts ${JSON.stringify(counts)}`);
    }
    return { label: s.label, shape: s.shape, system: "BullMQ", servers: 0, workers: s.workers, jobs, ...timing };
  } finally {
    await Promise.all(ws.map((w) => w.close()));
    await queue.close();
  }
}

/** The redis-server and BullMQ versions, for the report. */
export async function redisAndBullVersions(rig: QueueRig): Promise<string> {
  const v = (await rig.redis!.client.send("INFO", ["server"])) as string;
  const redisVersion = /redis_version:(\S+)/.exec(v)?.[1] ?? "?";
  const bull = (await import("bullmq/package.json", { with: { type: "json" } })).default.version as string;
  return `redis-server ${redisVersion} (appendonly yes, appendfsync everysec), bullmq ${bull}`;
}
