import type { JobStatus } from "../../../protocol/limits.ts";
import type { EndedJob, StoredJob } from "../store.ts";
import { lazyJson, setJson } from "../raw-json.ts";
import type { JobRow } from "./sqlite-schema.ts";

/** A value as a JSON column, or NULL when it is undefined. */
export const json = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
const parse = (s: string | null): unknown => (s === null ? undefined : JSON.parse(s));
/** A nullable column as an optional field. */
export const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

/**
 * A row of `jobs` as a StoredJob. A long input or output is parsed when first used, and its text
 * kept for answers that carry it (raw-json.ts); an input kept apart (the row's input is '') is
 * read through `inputApart` then: a status read or a result never loads it.
 */
export function toJob(r: JobRow, inputApart: (jobId: string) => string): StoredJob {
  const job = toEndedJob(r) as StoredJob;
  if (r.input === "") lazyJson(job, "input", () => inputApart(r.id));
  else setJson(job, "input", r.input);
  return job;
}

/** A row of `jobs` but its input, as an EndedJob (an input kept in the row is not parsed). */
export function toEndedJob(r: JobRow): EndedJob {
  const job: EndedJob = {
    id: r.id,
    endpointId: r.endpoint,
    status: r.status as JobStatus,
    webhook: opt(r.webhook),
    policy: JSON.parse(r.policy),
    s3Config: parse(r.s3_config) as StoredJob["s3Config"],
    sync: r.sync === 1,
    keyId: opt(r.key_id),
    origin: opt(r.origin),
    traceparent: opt(r.traceparent),
    createdAt: r.created_at,
    queuedAt: r.queued_at,
    startedAt: opt(r.started_at),
    completedAt: opt(r.completed_at),
    expiresAt: r.expires_at,
    deadline: opt(r.deadline),
    workerId: opt(r.worker_id),
    output: undefined, // set below
    error: parse(r.error),
    progress: parse(r.progress),
    losses: r.losses,
    retries: r.retries,
  };
  setJson(job, "output", r.output);
  return job;
}
