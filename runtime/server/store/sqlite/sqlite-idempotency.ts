import { IdempotencyConflictError, type EnqueuedJob, type NewJob, type StoredJob } from "../store.ts";
import type { SqliteContext } from "./sqlite-context.ts";

/** The key's row: one per API key, endpoint and Idempotency-Key. */
const scopeOf = (job: NewJob) => `${job.keyId ?? ""}\n${job.endpointId}\n${job.idempotency!.key}`;

/**
 * Idempotency-Keys on the embedded store: a row naming the job, written in the job's transaction
 * and removed with the job (SqliteContext.forgetJob).
 */
export const idempotency = {
  /**
   * In the job's transaction: the live job of its key (replayed), else `write()`'s new job with
   * its key written. Looked up before the backpressure check, so a retry of an accepted job is
   * answered even when the queue is full.
   */
  once(s: SqliteContext, job: NewJob, now: number, write: () => StoredJob): EnqueuedJob {
    const prior = idempotency.find(s, job, now);
    if (prior) return prior;
    const written = write();
    idempotency.tag(s, job);
    return written;
  },

  /**
   * The live job an earlier submission with the job's key made, replayed; undefined when there
   * is none (a key whose job has expired but is not yet swept is given up here). Throws
   * IdempotencyConflictError, changing nothing, when that job came with another body.
   */
  find(s: SqliteContext, job: NewJob, now: number): EnqueuedJob | undefined {
    if (!s.idempotencyKeys) return undefined;
    const key = s.db
      .query<{ job_id: string; body_hash: string }, [string]>("SELECT job_id, body_hash FROM idempotency_keys WHERE scope = ?")
      .get(scopeOf(job));
    if (!key) return undefined;
    const row = s.liveRow(job.endpointId, key.job_id, now);
    if (!row) return undefined;
    if (key.body_hash !== job.idempotency!.bodyHash) throw new IdempotencyConflictError(row.id);
    return { ...s.job(row), replayed: true };
  },

  /** Writes the key of the job just inserted (same transaction), in place of one whose job is gone. */
  tag(s: SqliteContext, job: NewJob): void {
    s.idempotencyKeys = true;
    s.db.query("INSERT OR REPLACE INTO idempotency_keys (scope, job_id, body_hash) VALUES (?, ?, ?)").run(scopeOf(job), job.id, job.idempotency!.bodyHash);
  },
};
