import { processCpu } from "./process-cpu.ts";
import { queueClient } from "./queue-client.ts";
import type { QueueRig } from "./queue-rig.ts";
import { summarize } from "./stats.ts";
import { printTable } from "./table.ts";

/** Figures of one payload size: the same number of bytes in each job's input and in its result. */
export interface PayloadRun {
  bytes: number;
  jobs: number;
  /** Server CPU per job (run, job-take, job-done and a status read of the result), µs. */
  cpuUs: number;
  /** On the Redis store: redis-server's CPU per job, µs. */
  redisCpuUs?: number;
  /** One job's four requests, one after the other, ms. */
  cycle: { p50: number; p99: number };
}

/**
 * One server, on a fresh embedded store or (`redis`) on the rig's redis-server under a fresh
 * key prefix; per payload size, one client loop submits a job whose input holds `bytes`
 * characters, takes it, posts a result of as many, and reads the result back with /status: how
 * the server's cost (and redis-server's) grows with the size of what it carries.
 */
export async function payloadRuns(
  rig: QueueRig,
  sizes: number[],
  jobsFor: (bytes: number) => number,
  redis = false,
): Promise<PayloadRun[]> {
  const name = rig.unique(redis ? "payload-redis" : "payload");
  const server = await rig.startServer(name, redis ? { store: `${rig.redis!.url}?prefix=${name}` } : {});
  const redisCpu = () => (redis ? processCpu(rig.redis!.proc.pid) : NaN);
  try {
    const c = queueClient(server);
    const stop = new AbortController();
    const cycle = async (input: unknown, output: unknown) => {
      const id = await c.run(input);
      const [job] = await c.take("payload-w", null, stop.signal);
      if (job?.id !== id) throw new Error(`payload run: took ${job?.id}, expected ${id}`);
      await c.done("payload-w", id, output);
      const status = await c.status(id);
      if (status !== "COMPLETED") throw new Error(`payload run: job ${id} is ${status}`);
    };
    for (let i = 0; i < 300; i++) await cycle({ warm: i }, { ok: true }); // warm the JIT
    const runs: PayloadRun[] = [];
    for (const bytes of sizes) {
      const input = { data: "i".repeat(bytes) };
      const output = { data: "o".repeat(bytes) };
      const jobs = jobsFor(bytes);
      const ms: number[] = [];
      const cpu0 = processCpu(server.proc.pid);
      const redis0 = redisCpu();
      for (let i = 0; i < jobs; i++) {
        const t = performance.now();
        await cycle(input, output);
        ms.push(performance.now() - t);
      }
      const { p50, p99 } = summarize(ms);
      const redisCpuUs = redis ? ((redisCpu() - redis0) * 1e6) / jobs : undefined;
      runs.push({ bytes, jobs, cpuUs: ((processCpu(server.proc.pid) - cpu0) * 1e6) / jobs, redisCpuUs, cycle: { p50, p99 } });
    }
    return runs;
  } finally {
    await rig.stopServer(server);
  }
}

export function printPayload(runs: PayloadRun[]): void {
  const kb = (b: number) => (b >= 1e6 ? `${b / 1e6} MB` : `${b / 1e3} KB`);
  const onRedis = runs.some((r) => r.redisCpuUs !== undefined);
  const head = [
    "input and result",
    "jobs",
    "server CPU µs/job",
    "server CPU µs per KB carried",
    ...(onRedis ? ["redis-server CPU µs/job"] : []),
    "cycle p50 ms",
    "cycle p99 ms",
  ];
  printTable(
    head,
    onRedis ? "lrrrrrr" : "lrrrrr",
    runs.map((r) => [
      kb(r.bytes),
      String(r.jobs),
      `**${r.cpuUs.toFixed(0)}**`,
      (r.cpuUs / ((2 * r.bytes) / 1000)).toFixed(1),
      ...(onRedis ? [`**${(r.redisCpuUs ?? NaN).toFixed(0)}**`] : []),
      `**${r.cycle.p50.toFixed(2)}**`,
      r.cycle.p99.toFixed(2),
    ]),
  );
  const [lo, hi] = [runs[0]!, runs[runs.length - 1]!];
  const redisGrowth = onRedis ? `, redis-server CPU per job ×${(hi.redisCpuUs! / lo.redisCpuUs!).toFixed(1)}` : "";
  if (runs.length > 1)
    console.log(
      `\n${kb(hi.bytes)} against ${kb(lo.bytes)} (×${hi.bytes / lo.bytes} bytes): server CPU per job ×${(hi.cpuUs / lo.cpuUs).toFixed(1)}${redisGrowth}`,
    );
  console.log("");
}
