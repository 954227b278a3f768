import type { JobStatus } from "../../../protocol/limits.ts";
import { topics } from "../store-events.ts";
import type { EndedJob, StoredJob, SweepReport, WebhookDelivery, WorkerReport, WorkerTouch } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";
import { idempotency } from "./sqlite-idempotency.ts";
import { opt } from "./sqlite-job-row.ts";
import type { JobRow, RowidRow } from "./sqlite-schema.ts";

/**
 * The server's housekeeping on the embedded store: worker presence, stops, webhook deliveries and
 * the sweep (expired Idempotency-Keys too). Those that take `announce` run inside the store's transaction.
 */
/**
 * The worker-loss rule for one job: re-queued the first time its worker is lost, FAILED (naming
 * the worker and why) the second time.
 */
function loseJob(s: SqliteContext, j: RowidRow, now: number, announce: Announce, why: string): "requeued" | "lost" {
  announce(topics.job(j.id));
  if (j.losses === 0) {
    s.db
      .query(
        `UPDATE jobs SET status = 'IN_QUEUE', losses = 1, worker_id = NULL, started_at = NULL, deadline = NULL,
           progress = NULL WHERE id = ?`,
      )
      .run(j.id);
    s.requeued(j, announce);
    return "requeued";
  }
  s.db
    .query(
      `UPDATE jobs SET status = 'FAILED', completed_at = ?, deadline = NULL, progress = NULL, error = ?,
         expires_at = ? WHERE id = ?`,
    )
    .run(
      now,
      JSON.stringify(`worker ${j.worker_id} was lost while running the job (${why}), twice`),
      s.expiring(now + s.retentionOf(j)),
      j.id,
    );
  s.index.move(j.endpoint, "IN_PROGRESS", "FAILED");
  s.running.delete(j.id);
  s.owe(j.id, now, announce);
  return "lost";
}

export const duties = {
  /**
   * Records that a worker is alive, when the id is free or the endpoint's and key's (null, changing
   * nothing, when it is another's). A heartbeat that lists the worker's running jobs also settles
   * the jobs it leaves out: one IN_PROGRESS on this worker since before `missingAfterMs` ago that
   * the worker no longer reports (its take answer was lost, say) follows the worker-loss rule.
   */
  touchWorker(
    s: SqliteContext,
    workerId: string,
    endpointId: string,
    keyId: string,
    now: number,
    report: WorkerReport | undefined,
    announce: Announce,
  ): WorkerTouch | null {
    const owner = s.db
      .query<{ endpoint: string; key_id: string }, [string]>("SELECT endpoint, key_id FROM workers WHERE id = ?")
      .get(workerId);
    // A row from before ids had owners ('') is claimed by the key that uses it next.
    if (owner && (owner.endpoint !== endpointId || (owner.key_id !== "" && owner.key_id !== keyId))) return null;
    if (!owner && report?.knownOnly) return null;
    const settled: WorkerTouch = { requeued: [], lost: [] };
    if (report?.runningIds && report.missingAfterMs !== undefined) {
      const reported = new Set(report.runningIds);
      const held = s.db
        .query<RowidRow, [string, number]>(
          "SELECT rowid AS rid, * FROM jobs WHERE worker_id = ? AND status = 'IN_PROGRESS' AND started_at <= ?",
        )
        .all(workerId, now - report.missingAfterMs);
      for (const j of held) {
        if (!reported.has(j.id)) settled[loseJob(s, j, now, announce, "its heartbeat no longer listed the job")].push(j.id);
      }
    }
    s.db
      .query(
        `INSERT INTO workers (id, endpoint, key_id, last_seen, running_ids, unhealthy) VALUES (?1, ?2, ?7, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET last_seen = ?3, key_id = ?7,
           running_ids = COALESCE(?4, running_ids), unhealthy = CASE WHEN ?6 THEN ?5 ELSE unhealthy END`,
      )
      .run(
        workerId,
        endpointId,
        now,
        report?.runningIds ? JSON.stringify(report.runningIds) : null,
        report?.unhealthy ? JSON.stringify(report.unhealthy) : null,
        report?.unhealthy !== undefined ? 1 : 0,
        keyId,
      );
    return settled;
  },

  /**
   * Marks the worker silent since forever: the next sweep loses its jobs and removes it. Its row
   * stays until then, so the id stays its owner's while jobs still name it.
   */
  forgetWorker(s: SqliteContext, workerId: string): void {
    s.db.query("UPDATE workers SET last_seen = 0 WHERE id = ?").run(workerId);
    s.takeWorkerStops(workerId);
  },

  takeStops(s: SqliteContext, workerId: string): string[] {
    return s.takeWorkerStops(workerId);
  },

  takeDueDeliveries(s: SqliteContext, now: number, leaseMs: number, limit: number): WebhookDelivery[] {
    return s.db
      .query<{ id: string; url: string; job: string; attempts: number }, [number, number, number]>(
        `UPDATE webhook_deliveries SET next_at = ?
         WHERE id IN (SELECT id FROM webhook_deliveries WHERE next_at <= ? ORDER BY next_at LIMIT ?)
         RETURNING id, url, job, attempts`,
      )
      .all(now + leaseMs, now, limit)
      .map((r) => ({ id: r.id, url: r.url, job: JSON.parse(r.job) as EndedJob, attempts: r.attempts }));
  },

  deliveryDone(s: SqliteContext, id: string): void {
    s.db.query("DELETE FROM webhook_deliveries WHERE id = ?").run(id);
  },

  deliveryRetry(s: SqliteContext, id: string, nextAt: number): void {
    s.db.query("UPDATE webhook_deliveries SET attempts = attempts + 1, next_at = ? WHERE id = ?").run(nextAt, id);
  },

  sweep(s: SqliteContext, now: number, workerLossTimeoutMs: number, announce: Announce): SweepReport {
    const report: SweepReport = { expired: 0, timedOut: [], requeued: [], lost: [] };

    const expired = s.db
      .query<Pick<JobRow, "id" | "endpoint" | "status" | "seq" | "worker_id">, [number]>(
        "DELETE FROM jobs WHERE expires_at <= ? RETURNING id, endpoint, status, seq, worker_id",
      )
      .all(now);
    for (const j of expired) {
      if (j.status === "IN_QUEUE") s.index.unqueued(j.endpoint, j.seq, null);
      else s.index.move(j.endpoint, j.status as JobStatus, null);
      s.forgetJob(j.id);
      if (j.status === "IN_PROGRESS") s.stop(j.worker_id, j.id, announce);
      announce(topics.job(j.id));
    }
    report.expired = expired.length;

    const late = s.db.query<JobRow, [number]>("SELECT * FROM jobs WHERE status = 'IN_PROGRESS' AND deadline <= ?").all(now);
    for (const j of late) {
      const timeout = (JSON.parse(j.policy) as StoredJob["policy"]).executionTimeout;
      s.db
        .query(
          `UPDATE jobs SET status = 'TIMED_OUT', completed_at = ?, deadline = NULL, progress = NULL, error = ?,
             expires_at = ? WHERE id = ?`,
        )
        .run(now, JSON.stringify(`execution timeout of ${timeout} ms exceeded`), s.expiring(now + s.retentionOf(j)), j.id);
      s.index.move(j.endpoint, "IN_PROGRESS", "TIMED_OUT");
      s.stop(j.worker_id, j.id, announce);
      announce(topics.job(j.id));
      s.owe(j.id, now, announce);
      report.timedOut.push({ jobId: j.id, workerId: opt(j.worker_id) });
    }

    const cutoff = now - workerLossTimeoutMs;
    const orphans = s.db
      .query<RowidRow, [number]>(
        `SELECT j.rowid AS rid, j.* FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id
         WHERE j.status = 'IN_PROGRESS' AND (w.id IS NULL OR w.last_seen <= ?)`,
      )
      .all(cutoff);
    for (const j of orphans) {
      const outcome = loseJob(s, j, now, announce, "it stopped sending heartbeats");
      (outcome === "requeued" ? report.requeued : report.lost).push(j.id);
    }
    const dead = s.db.query<{ id: string }, [number]>("DELETE FROM workers WHERE last_seen <= ? RETURNING id").all(cutoff);
    for (const w of dead) s.takeWorkerStops(w.id);
    idempotency.prune(s, now);
    return report;
  },
};
