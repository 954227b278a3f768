import { IdempotencyConflictError, type EnqueuedJob, type NewJob } from "../store.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import type { JobRow } from "./sqlite-schema.ts";

/**
 * Idempotency-Keys on the embedded store: the key and its body's hash are columns of the job's
 * own row (unique per API key and endpoint while set), so the key is written in the job's
 * transaction and goes when the job's row goes.
 */
export const idempotency = {
  /**
   * The live job an earlier submission with the job's key made, replayed; undefined when there
   * is none (a key whose job has expired but is not yet swept is given up here). Throws
   * IdempotencyConflictError, changing nothing, when that job came with another body.
   */
  find(s: SqliteContext, job: NewJob, now: number): EnqueuedJob | undefined {
    const tag = job.idempotency!;
    const row = s.db
      .query<JobRow & { idem_hash: string }, [string, string, string]>("SELECT * FROM jobs WHERE key_id = ? AND endpoint = ? AND idem_key = ?")
      .get(job.keyId ?? "", job.endpointId, tag.key);
    if (!row) return undefined;
    if (row.expires_at <= now) {
      s.db.query("UPDATE jobs SET idem_key = NULL, idem_hash = NULL WHERE id = ?").run(row.id);
      return undefined;
    }
    if (row.idem_hash !== tag.bodyHash) throw new IdempotencyConflictError(row.id);
    return { ...s.job(row), replayed: true };
  },

  /** Writes the key on the job just inserted (same transaction). */
  tag(s: SqliteContext, job: NewJob): void {
    const tag = job.idempotency!;
    s.db.query("UPDATE jobs SET key_id = ?, idem_key = ?, idem_hash = ? WHERE id = ?").run(job.keyId ?? "", tag.key, tag.bodyHash, job.id);
  },
};
