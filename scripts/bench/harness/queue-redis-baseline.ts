import { f1, f2, rate, type QueueShape } from "./queue-report.ts";
import { median } from "./stats.ts";
import type { QueueRig } from "./queue-rig.ts";
import { spoolThroughput } from "./queue-spool.ts";
import type { Throughput } from "./queue-timing.ts";
import { printTable } from "./table.ts";

/**
 * This checkout's Spool and another's (--baseline) on the Redis store, in `rounds` rounds: per
 * round, per shape, on 1 and 2 servers, both run back to back on the same redis-server (a fresh
 * key prefix each, Redis flushed between), the order swapped every other round so that neither
 * always runs first on a machine whose speed drifts.
 */
export async function redisBaselineRounds(
  rig: QueueRig,
  shapes: readonly QueueShape[],
  rounds: number,
  baseline: string,
  log: (line: string) => void,
): Promise<Throughput[]> {
  const runs: Throughput[] = [];
  const redis = rig.redis!;
  for (let round = 1; round <= rounds; round++) {
    for (const sh of shapes) {
      for (const servers of [1, 2]) {
        const one = async (root?: string) => {
          await redis.client.send("FLUSHALL", []);
          const name = `${sh.name}-s${servers}${root ? "-base" : ""}`;
          return spoolThroughput(rig, { ...sh, name, shape: sh.name, servers, redis: true, root });
        };
        const pair = round % 2 ? [await one(), await one(baseline)] : [await one(baseline), await one()].reverse();
        runs.push(...pair);
        const [s, b] = pair as [Throughput, Throughput];
        log(
          `  round ${round}, ${sh.label}, ${servers} server${servers > 1 ? "s" : ""}: Spool ${f1(rate(s))} jobs/s, baseline ${f1(rate(b))} jobs/s`,
        );
      }
    }
  }
  return runs;
}

/**
 * Per shape and server count: the median rate of each, the median of the per-round ratios (this
 * checkout ÷ baseline) and those ratios, then CPU per job in the servers and in redis-server
 * and Redis commands per job (scripts included), medians.
 */
export function printRedisBaseline(runs: Throughput[], shapes: readonly QueueShape[]): void {
  const rows: string[][] = [];
  const perJob = (rs: Throughput[], of: (r: Throughput) => number) => median(rs.map((r) => of(r) / r.jobs));
  for (const sh of shapes) {
    for (const servers of [1, 2]) {
      const of = (system: Throughput["system"]) => runs.filter((r) => r.system === system && r.shape === sh.name && r.servers === servers);
      const [s, b] = [of("Spool"), of("Spool baseline")];
      if (!s.length || s.length !== b.length) continue;
      const ratios = s.map((r, i) => rate(r) / rate(b[i]!));
      rows.push([
        sh.label,
        String(servers),
        f1(median(s.map(rate))),
        f1(median(b.map(rate))),
        `**${f2(median(ratios))}**`,
        ratios.map(f2).join(", "),
        `${(perJob(s, (r) => r.serverCpuS) * 1e6).toFixed(0)} / ${(perJob(b, (r) => r.serverCpuS) * 1e6).toFixed(0)}`,
        `${(perJob(s, (r) => r.redisCpuS) * 1e6).toFixed(0)} / ${(perJob(b, (r) => r.redisCpuS) * 1e6).toFixed(0)}`,
        `${f1(perJob(s, (r) => r.redisCommands))} / ${f1(perJob(b, (r) => r.redisCommands))}`,
      ]);
    }
  }
  if (!rows.length) return;
  const head = [
    "workers × concurrency",
    "servers",
    "Spool jobs/s",
    "baseline jobs/s",
    "Spool ÷ baseline",
    "per round",
    "servers CPU µs/job (Spool / baseline)",
    "redis-server CPU µs/job",
    "Redis commands/job",
  ];
  printTable(head, "lrrrrlrrr", rows);
  console.log("");
}
