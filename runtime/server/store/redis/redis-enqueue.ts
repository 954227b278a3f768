import { QueueFullError, type NewJob, type StoredJob } from "../store.ts";
import type { RedisScripts } from "./redis-scripts.ts";

/** Most submissions in one script call, and about the most bytes of their fields. */
const BATCH_JOBS = 64;
const BATCH_BYTES = 1024 * 1024;

interface Submission {
  job: NewJob;
  fields: string;
  now: number;
  maxQueued: string;
  handTo: string;
  resolve: (job: StoredJob) => void;
  reject: (error: unknown) => void;
}

/**
 * Enqueues on Redis. The submissions that arrive in the same turn of the event loop go to Redis
 * in one script call (one round trip and one script run for all of them, up to 64 or about 1 MB),
 * run in the order they came and answered each on its own: the same answers as one call each.
 */
export class RedisEnqueuer {
  #batch: Submission[] = [];
  #bytes = 0;

  constructor(private readonly scripts: RedisScripts) {}

  async enqueue(job: NewJob, now: number, maxQueued?: number, handTo?: string): Promise<StoredJob> {
    const fields = jobFields(job);
    if (this.#batch.length && (this.#batch.length >= BATCH_JOBS || this.#bytes + fields.length > BATCH_BYTES)) this.#flush();
    const { promise, resolve, reject } = Promise.withResolvers<StoredJob>();
    this.#batch.push({ job, fields, now, maxQueued: maxQueued === undefined ? "" : String(maxQueued), handTo: handTo ?? "", resolve, reject });
    this.#bytes += fields.length;
    if (this.#batch.length === 1) setImmediate(this.#flush);
    return promise;
  }

  readonly #flush = (): void => {
    const batch = this.#batch;
    if (!batch.length) return;
    this.#batch = [];
    this.#bytes = 0;
    const one = batch.length === 1 ? batch[0]! : undefined;
    const sent = one
      ? this.scripts.run("enqueue", [one.now, one.fields, one.maxQueued, one.handTo]).then((r) => [r])
      : this.scripts.run("enqueueBatch", [batch.at(-1)!.now, ...batch.flatMap((s) => [s.fields, s.maxQueued, s.handTo, s.now])]);
    sent.then(
      (replies: unknown[]) => batch.forEach((s, i) => settle(s, replies[i])),
      (error) => batch.forEach((s) => s.reject(error)),
    );
  };
}

/** The job's hash fields (strings) as the enqueue script takes them. */
function jobFields(job: NewJob): string {
  const fields: Record<string, string> = {
    id: job.id,
    ep: job.endpointId,
    input: JSON.stringify(job.input),
    policy: JSON.stringify(job.policy),
    timeout: String(job.policy.executionTimeout),
    ttl: String(job.policy.ttl),
    low: job.policy.lowPriority ? "1" : "0",
    sync: job.sync ? "1" : "0",
  };
  if (job.webhook) fields.webhook = job.webhook;
  if (job.s3Config) fields.s3 = JSON.stringify(job.s3Config);
  if (job.keyId) fields.key = job.keyId;
  return JSON.stringify(fields);
}

/**
 * Answers one submission from the script's reply: the order it gave the job (every other field
 * is known here), {'taken', seq, deadline} when it went to the waiting worker, {'full', depth} or
 * {'duplicate'}.
 */
function settle(s: Submission, reply: unknown): void {
  const { job, now } = s;
  if (Array.isArray(reply) && reply[0] === "full") return s.reject(new QueueFullError(Number(reply[1])));
  if (Array.isArray(reply) && reply[0] === "duplicate") return s.reject(new Error(`duplicate job id ${job.id}`));
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
    createdAt: now,
    queuedAt: now,
    expiresAt: now + job.policy.ttl,
    losses: 0,
    retries: 0,
  };
  if (!Array.isArray(reply)) return s.resolve(queued);
  s.resolve({ ...queued, status: "IN_PROGRESS", startedAt: now, deadline: Number(reply[2]), workerId: s.handTo });
}
