import { readFileSync } from "node:fs";
import { SqliteStore } from "../../runtime/server/store/sqlite-store.ts";
import { processCpu } from "./process-cpu.ts";
import { queueClient } from "./queue-client.ts";
import { ENDPOINT, type QueueSession } from "./queue-session.ts";
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
 * A fresh server on a store already holding `queued` jobs: `submits` /run through the session's
 * submit loops, then `takes` job-take -> job-done pairs by one worker, and the server's RSS.
 */
export async function backlogRun(session: QueueSession, queued: number, submits: number, takes: number): Promise<BacklogRun> {
  let filled = 0;
  const prepare = async (dir: string) => {
    await prefill(dir, queued);
    filled = performance.now();
  };
  const server = await session.startServer(session.unique(`backlog-${queued}`), { prepare });
  try {
    const c = queueClient(server);
    const h = await c.health();
    const startSeconds = (performance.now() - filled) / 1000;
    if (h.jobs.inQueue !== queued) throw new Error(`backlog ${queued}: /health says ${h.jobs.inQueue} queued`);
    // Warm up both processes (JIT, the server's statement cache) before timing.
    let warm = 0;
    await Promise.all(Array.from({ length: session.settings.clients }, async () => {
      while (warm < 1000) await c.run({ warm: warm++ });
    }));
    const cpu0 = processCpu(server.proc.pid);
    const start = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: session.settings.clients }, async () => {
      while (next < submits) await c.run({ i: next++ });
    }));
    const submitSeconds = (performance.now() - start) / 1000;
    const submitCpuUs = ((processCpu(server.proc.pid) - cpu0) * 1e6) / submits;

    const ms: number[] = [];
    const stop = new AbortController();
    for (let i = 0; i < takes; i++) {
      const t = performance.now();
      const [job] = await c.take("backlog-w", null, stop.signal);
      await c.done("backlog-w", job!.id);
      ms.push(performance.now() - t);
    }
    const { p50, p99 } = summarize(ms);
    return { queued, startSeconds, submitPerSecond: submits / submitSeconds, submitCpuUs, takeDone: { p50, p99 }, rssMiB: rssMiB(server.proc.pid) };
  } finally {
    await session.stopServer(server);
  }
}
