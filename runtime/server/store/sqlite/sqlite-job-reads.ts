import type { HealthResponse } from "../../../protocol/job-response.ts";
import type { JobStatus } from "../../../protocol/limits.ts";
import type { ScalingStats, StoredJob, StreamRead, UsageRow } from "../store.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import { opt } from "./sqlite-job-row.ts";
import { chunksOf } from "./sqlite-chunks.ts";
import { listJobs } from "./sqlite-job-list.ts";

/** Reads of jobs, workers and usage on the embedded store; none of them writes. */
export const jobReads = {
  get(s: SqliteContext, endpointId: string, jobId: string, now: number): StoredJob | null {
    const row = s.liveRow(endpointId, jobId, now);
    return row && s.job(row);
  },

  readChunks(s: SqliteContext, endpointId: string, jobId: string, from: number, now: number): StreamRead | null {
    const row = s.liveRow(endpointId, jobId, now);
    if (!row) return null;
    return { job: s.job(row), chunks: chunksOf(s, row, from) };
  },

  health(s: SqliteContext, endpointId: string, now: number, workerLossTimeoutMs: number): HealthResponse {
    const n = liveCounts(s, endpointId, now);
    const retried =
      s.db.query<{ value: number }, [string]>("SELECT value FROM counters WHERE endpoint = ? AND name = 'retried'").get(endpointId)
        ?.value ?? 0;
    const workers = s.db
      .query<{ busy: number; unhealthy: string | null }, [number, string, number]>(
        `SELECT EXISTS (SELECT 1 FROM jobs j WHERE j.worker_id = w.id AND j.status = 'IN_PROGRESS' AND j.expires_at > ?) AS busy,
           w.unhealthy FROM workers w WHERE w.endpoint = ? AND w.last_seen > ?`,
      )
      .all(now, endpointId, now - workerLossTimeoutMs);
    const running = workers.filter((w) => w.busy).length;
    const unhealthy = workers.filter((w) => !w.busy && w.unhealthy !== null).length;
    return {
      jobs: {
        completed: n.COMPLETED,
        failed: n.FAILED + n.TIMED_OUT,
        inProgress: n.IN_PROGRESS,
        inQueue: n.IN_QUEUE,
        retried,
      },
      workers: { idle: workers.length - running - unhealthy, running, initializing: 0, unhealthy },
    };
  },

  recent(
    s: SqliteContext,
    endpointId: string,
    now: number,
    limit: number,
    before?: string,
    status?: JobStatus,
  ): { jobs: StoredJob[]; next?: string } {
    return listJobs(s, endpointId, now, limit, before, status);
  },

  usage(s: SqliteContext): UsageRow[] {
    return s.db
      .query<{ key_id: string; endpoint: string; jobs: number; cost_e10: number }, []>("SELECT * FROM usage ORDER BY key_id, endpoint")
      .all()
      .map((r) => ({ keyId: r.key_id, endpointId: r.endpoint, jobs: r.jobs, cost: r.cost_e10 / 1e10 }));
  },

  scalingStats(s: SqliteContext, endpointId: string, now: number, workerLossTimeoutMs: number): ScalingStats {
    const n = liveCounts(s, endpointId, now);
    // The first live job of the normal-priority queue is the oldest (queue order is submission
    // order, a lost worker's job keeping its place); only expired ones not yet swept are walked past.
    let oldest: number | undefined;
    for (const e of s.index.of(endpointId).normal.inOrder()) {
      if (e.expiresAt <= now) continue;
      oldest = e.queuedAt;
      break;
    }
    const low = lowQueued(s, endpointId, now);
    const workers = s.db
      .query<{ id: string; running: number; unhealthy: string | null; last_active: number | null }, [number, string, number]>(
        `SELECT w.id, (SELECT COUNT(*) FROM jobs j WHERE j.worker_id = w.id AND j.status = 'IN_PROGRESS' AND j.expires_at > ?) AS running,
           w.unhealthy, w.last_active FROM workers w WHERE w.endpoint = ? AND w.last_seen > ?`,
      )
      .all(now, endpointId, now - workerLossTimeoutMs);
    return {
      queued: n.IN_QUEUE - low,
      queuedLowPriority: low,
      inProgress: n.IN_PROGRESS,
      oldestQueuedAt: oldest,
      workers: workers.map((w) => ({ id: w.id, running: w.running, unhealthy: w.unhealthy !== null, lastActive: opt(w.last_active) })),
    };
  },

  /** Queued jobs of the endpoint, exact, without counting the queue. */
  queueDepth(s: SqliteContext, endpointId: string, now: number): number {
    return liveCounts(s, endpointId, now).IN_QUEUE;
  },

  /** How many queued jobs of its endpoint will be taken before this one; null unless it is queued. */
  queuePosition(s: SqliteContext, endpointId: string, jobId: string, now: number): number | null {
    const row = s.db
      .query<{ seq: number }, [string, string, number]>(
        "SELECT seq FROM jobs WHERE id = ? AND endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ?",
      )
      .get(jobId, endpointId, now);
    if (!row) return null;
    if (!s.anyExpired(now)) return s.index.of(endpointId).queue.rank(row.seq);
    const expiredAhead = s.db
      .query<{ n: number }, [number, string, number]>(
        "SELECT COUNT(*) AS n FROM jobs INDEXED BY jobs_expiry WHERE expires_at <= ? AND endpoint = ? AND status = 'IN_QUEUE' AND seq < ?",
      )
      .get(now, endpointId, row.seq)!.n;
    return s.index.of(endpointId).queue.rank(row.seq) - expiredAhead;
  },
};

/**
 * Live rows of the endpoint by status: the counts in memory less the rows that expired and the
 * sweep has not removed yet (found through the expiry index, so as many as expired since the
 * last sweep, whatever the backlog).
 */
function liveCounts(s: SqliteContext, endpointId: string, now: number): Record<JobStatus, number> {
  const n = { ...s.index.of(endpointId).counts };
  if (!s.anyExpired(now)) return n;
  const expired = s.db
    .query<{ status: JobStatus; n: number }, [number, string]>(
      "SELECT status, COUNT(*) AS n FROM jobs INDEXED BY jobs_expiry WHERE expires_at <= ? AND endpoint = ? GROUP BY status",
    )
    .all(now, endpointId);
  for (const e of expired) n[e.status] -= e.n;
  return n;
}

/** Live low-priority queued jobs: counted in memory, less those expired and not yet swept. */
function lowQueued(s: SqliteContext, endpointId: string, now: number): number {
  if (!s.anyExpired(now)) return s.index.of(endpointId).queue.lowPriority;
  const expired = s.db
    .query<{ n: number }, [number, string]>(
      `SELECT COUNT(*) AS n FROM jobs INDEXED BY jobs_expiry WHERE expires_at <= ? AND endpoint = ? AND status = 'IN_QUEUE'
         AND json_extract(policy, '$.lowPriority') = 1`,
    )
    .get(now, endpointId)!.n;
  return s.index.of(endpointId).queue.lowPriority - expired;
}
