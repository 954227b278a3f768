import {
  IdempotencyConflictError,
  IdempotencyJobGoneError,
  type EnqueuedJob,
  type IdempotencyRecord,
  type NewJob,
  type StoredJob,
} from "../store.ts";
import type { SqliteContext } from "./sqlite-context.ts";

/** The key's row: one per API key, endpoint and Idempotency-Key. */
const scopeOf = (keyId: string | undefined, endpointId: string, key: string) => `${keyId ?? ""}\n${endpointId}\n${key}`;

/**
 * Idempotency-Keys on the embedded store: a row naming the job, written in the job's transaction
 * and kept until its own expiry, whatever becomes of the job; the sweep removes expired rows.
 */
export const idempotency = {
  /**
   * In the job's transaction: the job of its key while the key is kept (replayed), else
   * `write()`'s new job with its key written. Looked up before the backpressure check, so a retry
   * of an accepted job is answered even when the queue is full.
   */
  once(s: SqliteContext, job: NewJob, now: number, write: () => StoredJob): EnqueuedJob {
    const prior = idempotency.replay(s, job, now);
    if (prior) return prior;
    const written = write();
    idempotency.tag(s, job, now);
    return written;
  },

  /** What the key names while it is kept; null when it is free. */
  find(s: SqliteContext, keyId: string | undefined, endpointId: string, key: string, now: number): IdempotencyRecord | null {
    if (!s.idempotencyKeys) return null;
    const row = s.db
      .query<{ job_id: string; body_hash: string; expires_at: number }, [string, number]>(
        "SELECT job_id, body_hash, expires_at FROM idempotency_keys WHERE scope = ? AND expires_at > ?",
      )
      .get(scopeOf(keyId, endpointId, key), now);
    if (!row) return null;
    const live = s.liveRow(endpointId, row.job_id, now);
    return { jobId: row.job_id, bodyHash: row.body_hash, expiresAt: row.expires_at, job: live && s.job(live) };
  },

  /**
   * The job an earlier submission with the job's key made, replayed; undefined when the key is
   * free. Throws, changing nothing, IdempotencyConflictError when that submission came with another
   * body, IdempotencyJobGoneError when its job is no longer kept.
   */
  replay(s: SqliteContext, job: NewJob, now: number): EnqueuedJob | undefined {
    const tag = job.idempotency!;
    const found = idempotency.find(s, job.keyId, job.endpointId, tag.key, now);
    if (!found) return undefined;
    if (found.bodyHash !== tag.bodyHash) throw new IdempotencyConflictError(found.jobId);
    if (!found.job) throw new IdempotencyJobGoneError(tag.key, found.jobId);
    return { ...found.job, replayed: true };
  },

  /** Writes the key of the job just inserted (same transaction), in place of an expired one. */
  tag(s: SqliteContext, job: NewJob, now: number): void {
    s.idempotencyKeys = true;
    const tag = job.idempotency!;
    s.db
      .query("INSERT OR REPLACE INTO idempotency_keys (scope, job_id, body_hash, expires_at) VALUES (?, ?, ?, ?)")
      .run(scopeOf(job.keyId, job.endpointId, tag.key), job.id, tag.bodyHash, now + tag.ttlMs);
  },

  /** Removes the keys kept past their expiry (the sweep); how many. */
  prune(s: SqliteContext, now: number): number {
    if (!s.idempotencyKeys) return 0;
    return s.db.query("DELETE FROM idempotency_keys WHERE expires_at <= ?").run(now).changes;
  },
};
