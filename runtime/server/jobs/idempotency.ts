import type { JobRequest } from "../../protocol/job-request.ts";
import { IdempotencyConflictError, IdempotencyJobGoneError, type EnqueuedJob, type Store } from "../store/store.ts";
import { RefusedError } from "./refused.ts";

/**
 * JSON text of a value with every object's keys in sorted order: the same text for the same
 * values, whatever order a client wrote the keys in. Arrays keep their order.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  const o = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(o).sort()) if (o[k] !== undefined) parts.push(`${JSON.stringify(k)}:${canonicalJson(o[k])}`);
  return `{${parts.join(",")}}`;
}

/** What identifies a request body for an Idempotency-Key: the SHA-256 of its canonical JSON. */
export function bodyHash(request: JobRequest): string {
  return new Bun.CryptoHasher("sha256").update(canonicalJson(request)).digest("hex");
}

/** The 422 a key reused with another body answers. */
export function idempotencyConflict(err: IdempotencyConflictError): RefusedError {
  return new RefusedError("idempotency-conflict", `${err.message}: a retry must send the same body; a new request needs a new key`);
}

/** The 409 a retry answers whose key is kept for a job that is no longer: the work is not run again. */
export function idempotencyGone(err: IdempotencyJobGoneError): RefusedError {
  return new RefusedError(
    "idempotency-gone",
    `${err.message} (it ended longer ago than its retention, or expired or was purged); it is not run again: a new request needs a new key`,
  );
}

/**
 * The job an earlier submission with this Idempotency-Key made, while the key is kept, or
 * undefined: the 422 for another body, the 409 once the job is gone (a refusing endpoint answers
 * its retries so, and only a new key is refused).
 */
export async function replayOnly(
  store: Store,
  keyId: string,
  endpointId: string,
  key: string,
  hash: string,
  now: number,
): Promise<EnqueuedJob | undefined> {
  const found = await store.findByIdempotencyKey(keyId, endpointId, key, now);
  if (!found) return undefined;
  if (found.bodyHash !== hash) throw idempotencyConflict(new IdempotencyConflictError(found.jobId));
  if (!found.job) throw idempotencyGone(new IdempotencyJobGoneError(key, found.jobId));
  return { ...found.job, replayed: true };
}
