import type { Policy, S3Config } from "../../protocol/job-request.ts";
import type { JobStatus } from "../../protocol/limits.ts";
import type { HealthResponse } from "../../protocol/job-response.ts";
import type { JobLogLine } from "../../protocol/job-log.ts";
import type { StoreEvents } from "./store-events.ts";

/** A job as the store keeps it. Times are epoch milliseconds. */
export interface StoredJob {
  id: string;
  endpointId: string;
  status: JobStatus;
  input: Record<string, unknown>;
  webhook?: string;
  policy: Required<Policy>;
  s3Config?: S3Config;
  sync: boolean;
  /** Id of the API key that submitted the job. */
  keyId?: string;
  /** The origin (`scheme://host[:port]`) the submitting client called: the job's file URLs are built on it. */
  origin?: string;
  /** The W3C traceparent of the job's submit span (only while traces are on): its later spans are its children. */
  traceparent?: string;
  createdAt: number;
  /** When the job last entered the queue (submission or retry). */
  queuedAt: number;
  startedAt?: number;
  completedAt?: number;
  /** After this the job is gone: ttl while unfinished, retention once finished. */
  expiresAt: number;
  /** Execution deadline while IN_PROGRESS. */
  deadline?: number;
  workerId?: string;
  output?: unknown;
  error?: unknown;
  /** Last progress value a worker posted while IN_PROGRESS. */
  progress?: unknown;
  /** Times the job was re-queued because its worker was lost. */
  losses: number;
  retries: number;
}

/**
 * A job as a result leaves it: all but its input, which nothing reads once the job has ended
 * (a status answer, a webhook's body and the metrics never carry it). A result's answer and a
 * webhook call's copy of the job leave it out, so a long input is not read back or stored again.
 */
export type EndedJob = Omit<StoredJob, "input">;

export type NewJob = Pick<
  StoredJob,
  "id" | "endpointId" | "input" | "webhook" | "policy" | "s3Config" | "sync" | "keyId" | "origin" | "traceparent"
> & {
  /** The submission's Idempotency-Key: while a key of the same API key and endpoint is kept, its job answers instead. */
  idempotency?: IdempotencyTag;
};

/** An Idempotency-Key, a hash of the body it came with (the same key with another body is refused), and how long it is kept. */
export interface IdempotencyTag {
  key: string;
  bodyHash: string;
  /** From the submission that writes the key, whatever becomes of its job. */
  ttlMs: number;
}

/** What an Idempotency-Key names while it is kept (findByIdempotencyKey). */
export interface IdempotencyRecord {
  /** The job its first submission made. */
  jobId: string;
  bodyHash: string;
  /** When the key is free again. */
  expiresAt: number;
  /** That job as it is now; null once it is gone (retention or ttl over, purged). */
  job: StoredJob | null;
}

/** What enqueue answers: the new job, or (`replayed`) the live job an earlier submission with its Idempotency-Key made. */
export type EnqueuedJob = StoredJob & { replayed?: true };

export type JobResult = { output: unknown } | { error: unknown };

/** The store did not answer in time (Redis stopped replying): the request answers 503. */
export class StoreUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreUnavailableError";
  }
}

/** enqueue refused the job: its Idempotency-Key names a live job submitted with another body (nothing changed). */
export class IdempotencyConflictError extends Error {
  constructor(readonly jobId: string) {
    super(`Idempotency-Key already used for job ${jobId} with another request body`);
    this.name = "IdempotencyConflictError";
  }
}

/**
 * enqueue refused the job: its Idempotency-Key is kept, for a job that is no longer (ended past
 * its retention, expired or purged). A retry must not run the work again (nothing changed).
 */
export class IdempotencyJobGoneError extends Error {
  constructor(
    readonly key: string,
    readonly jobId: string,
  ) {
    super(`Idempotency-Key "${key}" was used for job ${jobId}, which is no longer kept`);
    this.name = "IdempotencyJobGoneError";
  }
}

/** enqueue refused the job: more than `maxQueued` jobs of its endpoint were queued (nothing changed). */
export class QueueFullError extends Error {
  constructor(readonly depth: number) {
    super(`queue full: ${depth} jobs waiting`);
    this.name = "QueueFullError";
  }
}

/** A cancel's answer: the job as it is now, and whether this call cancelled it (false: it had ended already). */
export interface CancelOutcome {
  job: StoredJob;
  cancelled: boolean;
}

export type RetryOutcome = { kind: "retried"; job: StoredJob } | { kind: "not-found" } | { kind: "conflict"; status: JobStatus };

export interface StreamRead {
  job: StoredJob;
  /** Chunks no earlier read returned, oldest first. */
  chunks: unknown[];
}

export interface LogRead {
  lines: JobLogLine[];
  /** The log reached its limit: its last line says so, and later lines were not kept. */
  truncated: boolean;
}

/** What one run of the housekeeping duties changed. */
export interface SweepReport {
  expired: number;
  timedOut: { jobId: string; workerId?: string }[];
  requeued: string[];
  lost: string[];
}

/**
 * full: every route (operators). client: the job API, not the worker routes. worker: the worker
 * routes only (what the scaler's workers and outside workers get). read-only: status, stream,
 * health, requests.
 */
export type KeyScope = "full" | "client" | "worker" | "read-only";
export const KEY_SCOPES: readonly KeyScope[] = ["full", "client", "worker", "read-only"];

export interface ApiKeyRecord {
  id: string;
  name: string;
  /** SHA-256 of the key, hex. The key itself is never stored. */
  hash: string;
  createdAt: number;
  revokedAt?: number;
  scope: KeyScope;
  /** When set, the key works only on these endpoints. */
  endpoints?: string[];
}

/** A webhook call owed for a job that ended; `job` is the job as it was when it ended. */
export interface WebhookDelivery {
  id: string;
  url: string;
  job: EndedJob;
  /** Attempts made so far. */
  attempts: number;
}

export interface StoreOptions {
  /** How long finished sync / async jobs stay readable. */
  retention: { syncMs: number; asyncMs: number };
}

export interface UsageRow {
  keyId: string;
  endpointId: string;
  jobs: number;
  /** US dollars, exact to 10 decimals. */
  cost: number;
}

export interface RequestLimit {
  requests: number;
  concurrent?: number;
}

export type Admission =
  /** `release` gives the slot back: at once where the count is in memory. */
  { ok: true; release: () => void | Promise<void> } | { ok: false; retryAfterSeconds: number; why: "window" | "concurrent" };

/** What the scaler decides from, for one endpoint. */
export interface ScalingStats {
  /** Queued jobs that may cause a scale-up (not lowPriority). */
  queued: number;
  queuedLowPriority: number;
  inProgress: number;
  /** When the oldest queued non-lowPriority job entered the queue. */
  oldestQueuedAt?: number;
  /** Workers heard from within the loss timeout. */
  workers: { id: string; running: number; unhealthy: boolean; lastActive?: number }[];
}

/** One failed worker start, as the store keeps the last of a run of them. */
export interface StartFailure {
  /** One line that says why. */
  message: string;
  at: number;
  workerId: string;
  exitCode?: number;
  signal?: string;
  /** The worker's last error output (the failed jobs' traceback). */
  output: string;
  /** Trying again will not help: the handler cannot load, or its setup said so. */
  permanent: boolean;
  /** Seconds until the next start is tried (Retry-After of a refused submission). */
  retryAfterS: number;
}

/** An endpoint's failed starts since a worker of it last started; every server reads the same. */
export interface StartFailureRun {
  attempts: number;
  /** When the run's first failure was recorded. */
  firstAt: number;
  /** Whether any failure of the run was permanent. */
  permanent: boolean;
  last: StartFailure;
}

export interface WorkerReport {
  /** Job ids the worker says it is running (ping's job_id). */
  runningIds?: string[];
  /**
   * With runningIds: a job IN_PROGRESS on this worker since at least this long ago that the
   * worker does not list is lost (the worker-loss rule applies to it).
   */
  missingAfterMs?: number;
  unhealthy?: { check: string; reason: string } | null;
  /**
   * The request names a job, which only a known worker can hold: a worker id not known yet is
   * not recorded, and the touch answers null.
   */
  knownOnly?: boolean;
}

/** A touch's answer: jobs the heartbeat's report settled by the worker-loss rule. */
export interface WorkerTouch {
  requeued: string[];
  /** FAILED: lost a second time. */
  lost: string[];
}

/**
 * The one storage interface, in queue terms. Every method is atomic: a backend changes all the
 * rows (or keys) a call touches together, or none. Methods that take `now` never read a clock.
 */
export interface Store {
  readonly events: StoreEvents;
  /** Whether enqueue may hand a job to a waiting worker (`handTo`); without, JobService parks no takers. */
  readonly handsOff?: boolean;

  /**
   * Queues a new job. With `maxQueued` (the 429 backpressure rule) it first checks the depth in
   * the same step and throws QueueFullError, changing nothing, when more jobs than that are queued.
   * With `handTo` (a worker waiting in job-take on this server) a store may, when the endpoint has
   * no job queued, write the job as taken by that worker in the same step and return it
   * IN_PROGRESS; otherwise (or a store that does not) it is queued and returned IN_QUEUE.
   * With `job.idempotency`, while a key of the same key id, endpoint and Idempotency-Key is kept,
   * its job is answered as it is now (`replayed`, nothing written); IdempotencyConflictError is
   * thrown when the key's body hash differs, IdempotencyJobGoneError when its job is gone. The key
   * is written in the same step as the new job and kept `ttlMs`, whatever becomes of the job.
   */
  enqueue(job: NewJob, now: number, maxQueued?: number, handTo?: string): Promise<EnqueuedJob>;
  /** What an Idempotency-Key of the API key `keyId` on the endpoint names, while it is kept (null: free). */
  findByIdempotencyKey(keyId: string | undefined, endpointId: string, key: string, now: number): Promise<IdempotencyRecord | null>;
  /** The job, or null when it does not exist for this endpoint or has expired. */
  get(endpointId: string, jobId: string, now: number): Promise<StoredJob | null>;
  /** Sets a live job's expiry (GET /status?ttl). */
  setExpiry(endpointId: string, jobId: string, expiresAt: number, now: number): Promise<StoredJob | null>;
  /** Moves up to `max` queued jobs, oldest first, to IN_PROGRESS on `workerId`. */
  claim(endpointId: string, workerId: string, max: number, now: number): Promise<StoredJob[]>;
  /**
   * Puts jobs a worker was given but never received (its job-take went away as they were
   * written) back in the queue, in their place, counting no worker loss. Jobs no longer
   * IN_PROGRESS on that worker stay as they are.
   */
  returnJobs(workerId: string, jobIds: string[], now: number): Promise<void>;
  /** Records a progress value; false when the job is not running on that worker. */
  progress(workerId: string, jobId: string, value: unknown, now: number): Promise<boolean>;
  /** Appends stream chunks; false when the job is not running on that worker. */
  appendChunks(workerId: string, jobId: string, chunks: unknown[], now: number): Promise<boolean>;
  /** The job and its chunks not yet returned, marking them returned, in one step. */
  readStream(endpointId: string, jobId: string, now: number): Promise<StreamRead | null>;
  /** The job and its chunks from index `from` on, marking nothing (SSE and the dashboard). */
  readChunks(endpointId: string, jobId: string, from: number, now: number): Promise<StreamRead | null>;
  /**
   * Appends log lines of a job running on `workerId`, kept with the job (same retention). A job's
   * log holds at most `maxBytes` (logLineBytes): the line that would pass it is replaced by one
   * cutLine, and nothing is kept after it. A retried job's log goes on after its earlier runs'.
   * Announces the job's topic. null when the job is not running on that worker; else whether
   * the log is cut (a worker sends no more lines then).
   */
  appendLogs(workerId: string, jobId: string, lines: JobLogLine[], maxBytes: number, now: number): Promise<{ truncated: boolean } | null>;
  /** The job's log lines from index `from` on, and whether its log was cut; null when the job does not exist for this endpoint. */
  readLogs(endpointId: string, jobId: string, from: number, now: number): Promise<LogRead | null>;
  /**
   * Ends a running job with its result. Idempotent: returns null (and changes nothing) when the
   * job is not IN_PROGRESS on `workerId`. With `streamOutput`, a job that streamed nothing gets its
   * output as its stream: splitChunk(output), one chunk unless its JSON is over 1 MB.
   * A completed job's `cost` (US dollars) is added to its key's usage in the same step.
   */
  finish(workerId: string, jobId: string, result: JobResult, streamOutput: boolean, now: number, cost?: number): Promise<EndedJob | null>;
  /** Jobs charged and their total cost, per API key and endpoint. */
  usage(): Promise<UsageRow[]>;
  /** Cancels a queued or running job (telling its worker); a finished job is returned unchanged. */
  cancel(endpointId: string, jobId: string, now: number): Promise<CancelOutcome | null>;
  /** FAILED or TIMED_OUT -> IN_QUEUE, same id and input, earlier output removed. */
  retry(endpointId: string, jobId: string, now: number): Promise<RetryOutcome>;
  /** Removes every queued job of the endpoint; returns how many. */
  purgeQueue(endpointId: string, now: number): Promise<number>;
  /**
   * Ends up to `limit` live queued jobs of the endpoint FAILED with `error` (its workers cannot
   * start), first in queue order; returns them. Fewer than `limit`: none is left.
   */
  failQueued(endpointId: string, error: unknown, now: number, limit: number): Promise<EndedJob[]>;
  health(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<HealthResponse>;
  /** Live jobs of the endpoint, newest first, only those in `status` when given; `before` is a cursor from an earlier page. */
  recent(
    endpointId: string,
    now: number,
    limit: number,
    before?: string,
    status?: JobStatus,
  ): Promise<{ jobs: StoredJob[]; next?: string }>;

  /**
   * Records that a worker is alive (every worker request does); see WorkerReport for pings. A
   * worker id belongs to the endpoint and key (`keyId`) that first used it, until it is forgotten
   * for silence: touched by another, it answers null and changes nothing.
   */
  touchWorker(workerId: string, endpointId: string, keyId: string, now: number, report?: WorkerReport): Promise<WorkerTouch | null>;
  /** Ids of jobs the worker must stop, removing them from its stop list. */
  takeStops(workerId: string): Promise<string[]>;
  /** Expiry, execution timeouts and worker loss, as of `now`; Idempotency-Keys past their ttl are removed. */
  sweep(now: number, workerLossTimeoutMs: number): Promise<SweepReport>;
  scalingStats(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<ScalingStats>;
  /** A worker known to be gone (its process ended): its jobs follow the worker-loss rule at the next sweep, and health stops counting it. */
  forgetWorker(workerId: string): Promise<void>;
  /** Queued jobs of the endpoint (the 429 backpressure rule); O(1) or O(log n) in queue depth. */
  queueDepth(endpointId: string, now: number): Promise<number>;
  /**
   * How many queued jobs of the endpoint will be taken before this one (0: next); null when the
   * job is not queued. O(log n) in queue depth.
   */
  queuePosition(endpointId: string, jobId: string, now: number): Promise<number | null>;

  /**
   * Webhook calls due by `now`, leased for `leaseMs` so that no other server takes them too.
   * A call is recorded in the same step as the job's final state, so none is lost to a crash.
   */
  takeDueDeliveries(now: number, leaseMs: number, limit: number): Promise<WebhookDelivery[]>;
  /** Delivered, or given up on: forget it. */
  deliveryDone(id: string): Promise<void>;
  /** Failed an attempt: try again at `nextAt`. */
  deliveryRetry(id: string, nextAt: number): Promise<void>;

  /**
   * Counts one request against a per-window and a concurrent limit, shared by every server on
   * this store. A refused request is not counted. Answered at once where the count is in memory.
   */
  admitRequest(bucket: string, limit: RequestLimit, windowMs: number, now: number): Admission | Promise<Admission>;
  /**
   * Takes or renews the lease `name` for `holder` for `ttlMs`: true while `holder` has it. The
   * housekeeping and scaling duties run only on the server that holds their lease.
   */
  tryLease(name: string, holder: string, ttlMs: number, now: number): Promise<boolean>;
  /**
   * Adds a failed start to the endpoint's run (starting one when there is none) and returns the
   * run; announces topics.startFailures.
   */
  addStartFailure(endpointId: string, failure: StartFailure): Promise<StartFailureRun>;
  /** Every endpoint's run of failed starts, by endpoint id (one read, whatever their number). */
  startFailureRuns(): Promise<Record<string, StartFailureRun>>;
  /** A worker of the endpoint started: its run ends. Announces topics.startFailures when there was one. */
  endStartFailures(endpointId: string): Promise<void>;

  addKey(key: ApiKeyRecord): Promise<void>;
  findKey(hash: string): Promise<ApiKeyRecord | null>;
  listKeys(): Promise<ApiKeyRecord[]>;
  revokeKey(idOrName: string, now: number): Promise<boolean>;

  close(): Promise<void>;
}
