import type { BacklogRun } from "./queue-backlog.ts";
import type { ProcessRun } from "./queue-processes.ts";
import { f1, f2 } from "./queue-report.ts";
import { median } from "./stats.ts";
import { printTable } from "./table.ts";

/**
 * Spool (embedded store) beside BullMQ per shape, workers in processes of their own: with
 * several rounds (Spool then BullMQ in each), the median of each figure and of the per-round
 * ratios, and those ratios.
 */
export function printSideBySide(runs: ProcessRun[], shapes: { name: string; label: string }[]): void {
  const rate = (r: ProcessRun) => r.jobs / r.seconds;
  const cpu = (rs: ProcessRun[], of: (r: ProcessRun) => number) => {
    const v = rs.map((r) => of(r) / r.jobs).filter((x) => !Number.isNaN(x));
    return v.length ? (median(v) * 1e6).toFixed(0) : "—";
  };
  const rows = shapes.map((sh) => {
    const b = runs.filter((r) => r.system === "BullMQ" && r.shape === sh.name);
    const s = runs.filter((r) => r.system === "Spool" && r.shape === sh.name);
    const ratios = s.map((r, i) => rate(r) / rate(b[i]!));
    return [
      sh.label,
      f1(median(b.map(rate))),
      f1(median(s.map(rate))),
      `**${f2(median(ratios))}**`,
      ratios.map(f2).join(", "),
      `**${cpu(s, (r) => r.serverCpuS)}**`,
      cpu(s, (r) => r.workersCpuS),
      cpu(b, (r) => r.workersCpuS),
      cpu(b, (r) => r.redisCpuS),
    ];
  });
  const head = [
    "workers × concurrency",
    "BullMQ jobs/s",
    "Spool jobs/s",
    "Spool/BullMQ",
    "ratio per round",
    "Spool server CPU µs/job",
    "Spool workers CPU µs/job",
    "BullMQ workers CPU µs/job",
    "redis-server CPU µs/job",
  ];
  printTable(head, "lrrrlrrrr", rows);
  console.log("");
}

/**
 * The reference servers run in the same rounds with the same workers and submitters (Spool of
 * another checkout, --baseline; the protocol and durable floors, --floor): each one's rate against BullMQ's
 * and against this checkout's Spool, round by round, and its server CPU per job beside Spool's.
 */
export function printReferences(runs: ProcessRun[], shapes: { name: string; label: string }[]): void {
  const rate = (r: ProcessRun) => r.jobs / r.seconds;
  const us = (r: ProcessRun) => (r.serverCpuS / r.jobs) * 1e6;
  const rows: string[][] = [];
  for (const sh of shapes) {
    const of = (system: ProcessRun["system"]) => runs.filter((r) => r.system === system && r.shape === sh.name);
    const [bull, spool] = [of("BullMQ"), of("Spool")];
    for (const system of ["Spool baseline", "protocol floor", "durable floor"] as const) {
      const ref = of(system);
      if (!ref.length) continue;
      const vsSpool = ref.map((r, i) => rate(spool[i]!) / rate(r));
      const cpuVsSpool = ref.map((r, i) => us(spool[i]!) / us(r));
      rows.push([
        sh.label,
        system,
        f1(median(ref.map(rate))),
        `**${f2(median(ref.map((r, i) => rate(r) / rate(bull[i]!))))}**`,
        `**${f2(median(vsSpool))}**`,
        vsSpool.map(f2).join(", "),
        `**${median(ref.map(us)).toFixed(0)}**`,
        `**${f2(median(cpuVsSpool))}**`,
        cpuVsSpool.map(f2).join(", "),
      ]);
    }
  }
  if (!rows.length) return;
  const head = [
    "workers × concurrency",
    "server",
    "jobs/s",
    "its jobs/s ÷ BullMQ's",
    "this Spool's jobs/s ÷ its",
    "per round",
    "server CPU µs/job",
    "this Spool's server CPU ÷ its",
    "per round",
  ];
  printTable(head, "llrrrlrrl", rows);
  console.log("");
}

/** Submit rate and take+done latency at each backlog, and the deepest against the shallowest. */
export function printBacklog(runs: BacklogRun[]): void {
  const rows = runs.map((r) => [
    r.queued.toLocaleString("en-US"),
    `**${f1(r.submitPerSecond)}**`,
    r.submitCpuUs.toFixed(0),
    `**${f2(r.takeDone.p50)}**`,
    f2(r.takeDone.p99),
    f1(r.rssMiB),
    f2(r.startSeconds),
  ]);
  const head = [
    "jobs queued",
    "submit jobs/s",
    "server CPU µs/submit",
    "take+done p50 ms",
    "take+done p99 ms",
    "server RSS MiB",
    "server start s",
  ];
  printTable(head, "rrrrrrr", rows);
  const [lo, hi] = [runs[0]!, runs[runs.length - 1]!];
  if (runs.length > 1) {
    console.log(
      `\n${hi.queued.toLocaleString("en-US")} queued against ${lo.queued.toLocaleString("en-US")}: submit jobs/s ×${f2(hi.submitPerSecond / lo.submitPerSecond)}, ` +
        `take+done p50 ×${f2(hi.takeDone.p50 / lo.takeDone.p50)}`,
    );
  }
  console.log("");
}
