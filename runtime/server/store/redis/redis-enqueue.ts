import {
  IdempotencyConflictError,
  IdempotencyJobGoneError,
  QueueFullError,
  type EnqueuedJob,
  type IdempotencyRecord,
  type NewJob,
  type StoredJob,
} from "../store.ts";
import { fromReply, type JobReply } from "./redis-job-codec.ts";

/** The part of an Idempotency-Key's Redis key after `idem:`: one per API key, endpoint and key. */
export const idempotencyScope = (keyId: string | undefined, endpointId: string, key: string) => `${keyId ?? ""}:${endpointId}:${key}`;

/** The idemFind script's answer, {job id, body hash, expiry, job or false} or null, as an IdempotencyRecord. */
export function idempotencyRecord(reply: [string, string, string, JobReply | null] | null): IdempotencyRecord | null {
  if (!reply) return null;
  const [jobId, bodyHash, expiresAt, job] = reply;
  return { jobId, bodyHash, expiresAt: Number(expiresAt), job: job ? fromReply(job) : null };
}

/** The job's hash fields (strings) but its input, as a JSON object, as the enqueue script takes them (the input goes apart). */
export function jobFields(job: NewJob): string {
  const fields: Record<string, string> = {
    id: job.id,
    ep: job.endpointId,
    policy: JSON.stringify(job.policy),
    timeout: String(job.policy.executionTimeout),
    ttl: String(job.policy.ttl),
    low: job.policy.lowPriority ? "1" : "0",
    sync: job.sync ? "1" : "0",
  };
  if (job.webhook) fields.webhook = job.webhook;
  if (job.s3Config) fields.s3 = JSON.stringify(job.s3Config);
  if (job.keyId) fields.key = job.keyId;
  if (job.origin) fields.origin = job.origin;
  if (job.traceparent) fields.trace = job.traceparent;
  // Read by the script, not written to the job's hash: the key is kept apart, until its own expiry.
  if (job.idempotency) {
    fields.idem = idempotencyScope(job.keyId, job.endpointId, job.idempotency.key);
    fields.ih = job.idempotency.bodyHash;
    fields.ittl = String(job.idempotency.ttlMs);
  }
  return JSON.stringify(fields);
}

/**
 * The stored job from the enqueue script's answer: the order it gave the job (every other field
 * is known here), {'taken', seq, deadline} when it went to the waiting worker `handTo`, the live
 * job of its Idempotency-Key for {'same', job}; throws for {'full', depth}, {'conflict', id},
 * {'gone', id} and {'duplicate'}.
 */
export function enqueued(job: NewJob, now: number, handTo: string | undefined, reply: unknown): EnqueuedJob {
  if (Array.isArray(reply) && reply[0] === "full") throw new QueueFullError(Number(reply[1]));
  if (Array.isArray(reply) && reply[0] === "same") return { ...fromReply(reply[1] as JobReply), replayed: true };
  if (Array.isArray(reply) && reply[0] === "conflict") throw new IdempotencyConflictError(String(reply[1]));
  if (Array.isArray(reply) && reply[0] === "gone") throw new IdempotencyJobGoneError(job.idempotency!.key, String(reply[1]));
  if (Array.isArray(reply) && reply[0] === "duplicate") throw new Error(`duplicate job id ${job.id}`);
  const queued: StoredJob = {
    id: job.id,
    endpointId: job.endpointId,
    status: "IN_QUEUE",
    input: job.input,
    webhook: job.webhook || undefined,
    policy: job.policy,
    s3Config: job.s3Config,
    sync: job.sync,
    keyId: job.keyId || undefined,
    origin: job.origin || undefined,
    traceparent: job.traceparent || undefined,
    createdAt: now,
    queuedAt: now,
    expiresAt: now + job.policy.ttl,
    losses: 0,
    retries: 0,
  };
  if (!Array.isArray(reply)) return queued;
  return { ...queued, status: "IN_PROGRESS", startedAt: now, deadline: Number(reply[2]), workerId: handTo };
}
