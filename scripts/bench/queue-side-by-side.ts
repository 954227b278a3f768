import type { BacklogRun } from "./queue-backlog.ts";
import type { ProcessRun } from "./queue-processes.ts";
import { printTable } from "./table.ts";

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const us = (s: number, jobs: number) => (Number.isNaN(s) ? "—" : ((s * 1e6) / jobs).toFixed(0));

/** Spool (embedded store) beside BullMQ per shape, workers in processes of their own, with the ratio. */
export function printSideBySide(runs: ProcessRun[], shapes: { name: string; label: string }[]): void {
  const rows = shapes.map((sh) => {
    const b = runs.find((r) => r.system === "BullMQ" && r.shape === sh.name)!;
    const s = runs.find((r) => r.system === "Spool" && r.shape === sh.name)!;
    const rate = (r: ProcessRun) => r.jobs / r.seconds;
    return [
      sh.label,
      f1(rate(b)),
      f1(rate(s)),
      `**${f2(rate(s) / rate(b))}**`,
      `**${us(s.serverCpuS, s.jobs)}**`,
      us(s.workersCpuS, s.jobs),
      us(b.workersCpuS, b.jobs),
      us(b.redisCpuS, b.jobs),
    ];
  });
  const head = [
    "workers × concurrency",
    "BullMQ jobs/s",
    "Spool jobs/s",
    "Spool/BullMQ",
    "Spool server CPU µs/job",
    "Spool workers CPU µs/job",
    "BullMQ workers CPU µs/job",
    "redis-server CPU µs/job",
  ];
  printTable(head, "lrrrrrrr", rows);
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
  const head = ["jobs queued", "submit jobs/s", "server CPU µs/submit", "take+done p50 ms", "take+done p99 ms", "server RSS MiB", "server start s"];
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
