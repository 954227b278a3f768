import type { JobStatus } from "../../../protocol/limits.ts";
import { setJson } from "../raw-json.ts";
import type { EndedJob, StoredJob } from "../store.ts";

/** A cost as an integer of 1e-10 dollars for HINCRBY, or "" when there is none or it cannot be one. */
export function costE10(cost: number | undefined): string {
  if (cost === undefined) return "";
  const e10 = Math.round(cost * 1e10);
  return Number.isSafeInteger(e10) && e10 >= 0 ? e10.toFixed(0) : "";
}

const opt = (s: string | undefined) => (s === undefined || s === "" ? undefined : s);
const num = (s: string | undefined) => (s === undefined || s === "" ? undefined : Number(s));
const json = (s: string | undefined) => (s === undefined ? undefined : JSON.parse(s));

/** A job as a script answers it (reply() in lua/prelude.lua): its other fields as JSON, then its input and output as stored. */
export type JobReply = [fields: string, input: string | null, output: string | null];

/** The job's hash fields (all strings) from a script's answer. */
export function replyFields([fields, input, output]: JobReply): Record<string, string> {
  const h = JSON.parse(fields) as Record<string, string>;
  if (input !== null) h.input = input;
  if (output !== null) h.output = output;
  return h;
}

/** A script's answer of a job as a StoredJob. */
export const fromReply = (r: JobReply): StoredJob => toJob(replyFields(r));

/** A script's answer of an ended job (its input left out) as an EndedJob; an input in it (an old-form webhook call's) is not read. */
export const endedFromReply = (r: JobReply): EndedJob => toEndedJob(replyFields(r));

/** A job hash (all strings) as a StoredJob; a long input or output is parsed when first used (raw-json.ts). */
export function toJob(h: Record<string, string>): StoredJob {
  const job = toEndedJob(h) as StoredJob;
  setJson(job, "input", h.input!);
  return job;
}

/** A job hash (all strings) but its input, as an EndedJob. */
export function toEndedJob(h: Record<string, string>): EndedJob {
  const job: EndedJob = {
    id: h.id!,
    endpointId: h.ep!,
    status: h.status as JobStatus,
    webhook: opt(h.webhook),
    policy: JSON.parse(h.policy!),
    s3Config: json(opt(h.s3)),
    sync: h.sync === "1",
    keyId: opt(h.key),
    origin: opt(h.origin),
    traceparent: opt(h.trace),
    createdAt: Number(h.created),
    queuedAt: Number(h.queued),
    startedAt: num(h.started),
    completedAt: num(h.completed),
    expiresAt: Number(h.expires),
    // A final state leaves the deadline in the hash (one write less): it means something only while running.
    deadline: h.status === "IN_PROGRESS" ? num(h.deadline) : undefined,
    workerId: opt(h.worker),
    output: undefined, // set below
    error: json(h.error),
    progress: json(h.progress),
    losses: Number(h.losses),
    retries: Number(h.retries),
  };
  setJson(job, "output", h.output);
  return job;
}
