import { readFileSync } from "node:fs";
import { SqliteStore } from "../../../runtime/server/store/sqlite/sqlite-store.ts";
import { processCpu } from "./process-cpu.ts";
import { queueClient } from "./queue-client.ts";
import { ENDPOINT, type QueueRig } from "./queue-rig.ts";
import type { SpoolProcess } from "./spool-process.ts";
import { summarize } from "./stats.ts";

/** Figures of one server holding `queued` jobs. */
export interface BacklogRun {
  queued: number;
  /** Seconds from spawning the server to its first answer (it reads the queue in at start). */
  startSeconds: number;
  submitPerSecond: number;
  /** Server CPU per submission, µs. */
  submitCpuUs: number;
  /** One worker's job-take then job-done, one after the other, ms. */
  takeDone: { p50: number; p99: number };
  rssMiB: number;
}

const POLICY = { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 };

/** Fills an embedded store file with `n` queued jobs, 1000 to a transaction. */
async function prefill(dataDir: string, n: number): Promise<void> {
  const store = SqliteStore.open(dataDir, { retention: { syncMs: 60_000, asyncMs: 1_800_000 } });
  const now = Date.now();
  for (let i = 0; i < n; i += 1000) {
    const batch = Array.from({ length: Math.min(1000, n - i) }, (_, k) =>
      store.enqueue({ id: crypto.randomUUID(), endpointId: ENDPOINT, input: { i: i + k }, policy: POLICY, sync: false }, now),
    );
    await Promise.all(batch);
  }
  await store.close();
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/**
 * One fresh server per depth, each on a store already holding that many jobs, all running at
 * once and measured in turn, `rounds` times round-robin (so that a change in the shared
 * machine's load falls on every depth alike): `submits` /run through the rig's submit loops
 * and `takes` job-take -> job-done pairs by one worker, split over the rounds; the submit rate is
 * the median of the rounds, latencies are pooled. RSS is read at the end.
 */
export async function backlogRuns(rig: QueueRig, depths: number[], submits: number, takes: number, rounds = 3): Promise<BacklogRun[]> {
  const servers: { queued: number; server: SpoolProcess; startSeconds: number; rates: number[]; cpuUs: number[]; ms: number[] }[] = [];
  try {
    for (const queued of depths) {
      let filled = 0;
      const prepare = async (dir: string) => {
        await prefill(dir, queued);
        filled = performance.now();
      };
      const server = await rig.startServer(rig.unique(`backlog-${queued}`), { prepare });
      const h = await queueClient(server).health();
      const startSeconds = (performance.now() - filled) / 1000;
      if (h.jobs.inQueue !== queued) throw new Error(`backlog ${queued}: /health says ${h.jobs.inQueue} queued`);
      servers.push({ queued, server, startSeconds, rates: [], cpuUs: [], ms: [] });
    }
    for (const s of servers) {
      // Warm up both processes (JIT, the server's statement cache) before timing.
      const c = queueClient(s.server);
      let warm = 0;
      await Promise.all(
        Array.from({ length: rig.settings.clients }, async () => {
          while (warm < 1000) await c.run({ warm: warm++ });
        }),
      );
    }
    const perRound = Math.ceil(submits / rounds);
    const takesPerRound = Math.ceil(takes / rounds);
    const stop = new AbortController();
    for (let r = 0; r < rounds; r++) {
      for (const s of servers) {
        const c = queueClient(s.server);
        const cpu0 = processCpu(s.server.proc.pid);
        const start = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: rig.settings.clients }, async () => {
            while (next < perRound) await c.run({ i: next++ });
          }),
        );
        s.rates.push(perRound / ((performance.now() - start) / 1000));
        s.cpuUs.push(((processCpu(s.server.proc.pid) - cpu0) * 1e6) / perRound);
      }
      for (const s of servers) {
        const c = queueClient(s.server);
        for (let i = 0; i < takesPerRound; i++) {
          const t = performance.now();
          const [job] = await c.take("backlog-w", null, stop.signal);
          await c.done("backlog-w", job!.id);
          s.ms.push(performance.now() - t);
        }
      }
    }
    const median = (xs: number[]) => summarize(xs).p50;
    return servers.map((s) => {
      const { p50, p99 } = summarize(s.ms);
      return {
        queued: s.queued,
        startSeconds: s.startSeconds,
        submitPerSecond: median(s.rates),
        submitCpuUs: median(s.cpuUs),
        takeDone: { p50, p99 },
        rssMiB: rssMiB(s.server.proc.pid),
      };
    });
  } finally {
    await Promise.all(servers.map((s) => rig.stopServer(s.server)));
  }
}
