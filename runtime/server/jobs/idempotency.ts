import type { JobRequest } from "../../protocol/job-request.ts";
import { HttpError } from "../http/http-error.ts";
import { IdempotencyConflictError, QueueFullError, type EnqueuedJob, type NewJob, type Store } from "../store/store.ts";

/** What identifies a request body for an Idempotency-Key: the SHA-256 of the request as read. */
export function bodyHash(request: JobRequest): string {
  return new Bun.CryptoHasher("sha256").update(JSON.stringify(request)).digest("hex");
}

/** The 422 a key reused with another body answers. */
export function idempotencyConflict(err: IdempotencyConflictError): HttpError {
  return new HttpError(422, `${err.message}: a retry must send the same body; a new request needs a new key`);
}

/**
 * The live job an earlier submission with `job`'s Idempotency-Key made, or undefined: the store
 * is asked for a replay only (a queue limit below any depth admits no new job). The same key
 * with another body is the 422.
 */
export async function replayOnly(store: Store, job: NewJob, now: number): Promise<EnqueuedJob | undefined> {
  try {
    const found = await store.enqueue(job, now, -1);
    return found.replayed ? found : undefined;
  } catch (err) {
    if (err instanceof IdempotencyConflictError) throw idempotencyConflict(err);
    if (err instanceof QueueFullError) return undefined;
    throw err;
  }
}
