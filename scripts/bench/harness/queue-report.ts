import type { CommandCounts } from "./queue-monitor.ts";
import { WARM_UP, type Latency } from "./queue-spool.ts";
import type { Throughput } from "./queue-timing.ts";
import { printTable } from "./table.ts";

export const f1 = (n: number) => n.toFixed(1);
export const f2 = (n: number) => n.toFixed(2);
/** End-to-end jobs per second. */
export const rate = (r: Throughput) => r.jobs / r.seconds;
const perJob = (r: Throughput, s: number) => (Number.isNaN(s) ? "n/a" : ((s * 1e6) / r.jobs).toFixed(0));

/** A scenario shape: worker count and how each takes jobs (Spool) or its concurrency (BullMQ). */
export interface QueueShape {
  label: string;
  name: string;
  workers: number;
  size: number | null;
  concurrency: number;
}

/** The throughput table: embedded-store columns, or the Redis ones (Spool and BullMQ rows). */
export function printThroughput(runs: Throughput[], onRedis: boolean): void {
  const common = (r: Throughput) => [String(r.jobs), f2(r.seconds), `**${f1(rate(r))}**`, f1(r.jobs / r.submitSeconds)];
  if (onRedis) {
    const head = [
      "system",
      "servers",
      "workers × concurrency",
      "jobs",
      "end-to-end s",
      "jobs/s",
      "submit-only jobs/s",
      "Spool servers CPU µs/job",
    ];
    head.push("bench process CPU µs/job", "redis-server CPU µs/job", "Redis commands/job");
    const rows = runs.map((r) => {
      const bull = r.system === "BullMQ";
      const cmds = Number.isNaN(r.redisCommands) ? "n/a" : f1(r.redisCommands / r.jobs);
      const serverCpu = bull ? "—" : perJob(r, r.serverCpuS);
      return [
        r.system,
        bull ? "— (in-process)" : String(r.servers),
        r.label,
        ...common(r),
        serverCpu,
        perJob(r, r.clientCpuS),
        perJob(r, r.redisCpuS),
        cmds,
      ];
    });
    printTable(head, "lrlrrrrrrrr", rows);
  } else {
    const head = ["scenario", "jobs", "end-to-end s", "jobs/s", "submit-only jobs/s", "server CPU µs/job", "client CPU µs/job"];
    printTable(
      head,
      "lrrrrrr",
      runs.map((r) => [r.label, ...common(r), perJob(r, r.serverCpuS), perJob(r, r.clientCpuS)]),
    );
  }
  console.log("");
}

/** Spool on 1 and 2 servers against BullMQ, per shape, as ratios of jobs/s. */
export function printRatios(onRedis: Throughput[], shapes: readonly QueueShape[], batch: number): void {
  const rows = shapes.map((sh) => {
    const pick = (system: string, servers: number) =>
      onRedis.find((r) => r.system === system && r.servers === servers && r.shape === sh.name)!;
    const [b, s1, s2] = [pick("BullMQ", 0), pick("Spool", 1), pick("Spool", 2)];
    const what = sh.size === null ? `${sh.label}` : `${sh.workers} × ${batch} (Spool job-take-batch vs BullMQ concurrency ${batch})`;
    return [what, f1(rate(b)), f1(rate(s1)), `**${f2(rate(s1) / rate(b))}**`, f1(rate(s2)), `**${f2(rate(s2) / rate(b))}**`];
  });
  const head = [
    "workers × concurrency",
    "BullMQ jobs/s",
    "Spool 1 server jobs/s",
    "Spool/BullMQ, 1 server",
    "Spool 2 servers jobs/s",
    "Spool/BullMQ, 2 servers",
  ];
  printTable(head, "lrrrrr", rows);
  console.log("");
}

/**
 * The protocol floor on the same Redis (--floor): its rate against BullMQ's, and Spool's (1
 * server) against the floor's, with each one's CPU per job in the server and in redis-server;
 * then two floor servers sharing their queue against one server that shares it the same way
 * (no hand-off in memory), beside Spool's two servers against one.
 */
export function printRedisFloor(onRedis: Throughput[], shapes: readonly QueueShape[]): void {
  const pick = (system: string, sh: QueueShape, servers = 1) =>
    onRedis.find((r) => r.system === system && r.shape === sh.name && r.servers === servers)!;
  const rows = shapes.map((sh) => {
    const [b, s, f] = [pick("BullMQ", sh, 0), pick("Spool", sh), pick("protocol floor", sh)];
    return [
      sh.label,
      f1(rate(f)),
      `**${f2(rate(f) / rate(b))}**`,
      `**${f2(rate(s) / rate(f))}**`,
      perJob(f, f.serverCpuS),
      perJob(s, s.serverCpuS),
      perJob(f, f.redisCpuS),
      perJob(s, s.redisCpuS),
      perJob(b, b.redisCpuS),
    ];
  });
  const head = [
    "workers × concurrency",
    "floor jobs/s",
    "floor/BullMQ",
    "Spool (1 server)/floor",
    "floor server CPU µs/job",
    "Spool server CPU µs/job",
    "redis-server CPU µs/job, floor",
    "Spool",
    "BullMQ",
  ];
  printTable(head, "lrrrrrrrr", rows);
  console.log("");
  const two = shapes.map((sh) => {
    const [f1s, f2s, s1, s2] = [
      pick("protocol floor, shared queue", sh),
      pick("protocol floor, shared queue", sh, 2),
      pick("Spool", sh),
      pick("Spool", sh, 2),
    ];
    return [
      sh.label,
      f1(rate(f1s)),
      f1(rate(f2s)),
      `**${f2(rate(f2s) / rate(f1s))}**`,
      perJob(f1s, f1s.serverCpuS),
      perJob(f2s, f2s.serverCpuS),
      `**${f2(rate(s2) / rate(s1))}**`,
    ];
  });
  const head2 = [
    "workers × concurrency",
    "shared-queue floor, 1 server jobs/s",
    "2 servers jobs/s",
    "2 floor servers ÷ 1",
    "server CPU µs/job, 1 floor server",
    "2 floor servers",
    "Spool: 2 servers ÷ 1",
  ];
  printTable(head2, "lrrrrrr", two);
  console.log("");
}

function breakdown(m: Map<string, number>, jobs: number): string {
  const total = [...m.values()].reduce((a, b) => a + b, 0);
  const parts = [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .filter(([, n]) => n / jobs >= 0.01)
    .map(([k, n]) => `${k} ${f2(n / jobs)}`);
  return `**${f2(total / jobs)}**${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

/** Redis commands per job under MONITOR, round trips and inside Lua, with the main commands. */
export function printProfiles(profiles: ({ label: string; r: Throughput } & CommandCounts)[], jobs: number): void {
  console.log(`### Redis commands per job under MONITOR (${jobs} jobs, 1 worker, untimed)\n`);
  const rows = profiles.map((p) => [p.label, breakdown(p.topLevel, p.r.jobs), breakdown(p.inScripts, p.r.jobs)]);
  printTable(["system", "round trips/job (commands sent by clients)", "commands/job inside Lua"], "lll", rows);
  console.log("");
}

/** Sequential latency: p50, p99, mean and max per kind of request. */
export function printLatency(lat: Latency[]): void {
  const rows = lat.map((l) => [l.label, String(l.n), `**${f2(l.p50)}**`, `**${f2(l.p99)}**`, f2(l.mean), f2(l.max)]);
  printTable(
    [`latency (sequential, after ${WARM_UP} untimed calls of each)`, "n", "p50 ms", "p99 ms", "mean ms", "max ms"],
    "lrrrrr",
    rows,
  );
  console.log("");
}
