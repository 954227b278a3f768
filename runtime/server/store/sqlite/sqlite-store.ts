import { Database } from "bun:sqlite";
import checkpointerSource from "./sqlite-checkpointer.worker.js" with { type: "text" };
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { HealthResponse } from "../../../protocol/job-response.ts";
import type { JobStatus } from "../../../protocol/limits.ts";
import { LocalRequestCounter } from "./sqlite-request-counter.ts";
import { SqliteRateWindows } from "./sqlite-rate-windows.ts";
import { LocalEvents } from "../store-events.ts";
import { type Announce, SqliteContext } from "./sqlite-context.ts";
import { duties } from "./sqlite-duties.ts";
import { jobReads } from "./sqlite-job-reads.ts";
import { jobTransitions } from "./sqlite-job-transitions.ts";
import { apiKeys } from "./sqlite-keys.ts";
import { startFailures } from "./sqlite-start-failures.ts";
import { MIGRATIONS, SCHEMA, SCHEMA_VERSION } from "./sqlite-schema.ts";
import type {
  CancelOutcome,
  LogRead,
  Admission,
  ApiKeyRecord,
  EndedJob,
  JobResult,
  RequestLimit,
  NewJob,
  RetryOutcome,
  ScalingStats,
  StartFailure,
  StartFailureRun,
  Store,
  UsageRow,
  StoreOptions,
  StoredJob,
  StreamRead,
  SweepReport,
  WebhookDelivery,
  WorkerReport,
  WorkerTouch,
} from "../store.ts";
import { IdempotencyConflictError, IdempotencyJobGoneError, QueueFullError, type EnqueuedJob, type IdempotencyRecord } from "../store.ts";
import { idempotency } from "./sqlite-idempotency.ts";
import { failQueuedJobs } from "./sqlite-fail-queued.ts";
import { jobLogs } from "./sqlite-logs.ts";
import type { JobLogLine } from "../../../protocol/job-log.ts";

/** A write that refused before changing anything: it fails its own call only. */
const isRefusal = (e: unknown) =>
  e instanceof QueueFullError || e instanceof IdempotencyConflictError || e instanceof IdempotencyJobGoneError;

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };
/** A write waiting for the next group commit. */
type Write = { fn: (announce: Announce) => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/** How often the checkpoint thread copies the write-ahead log into the database file. */
const CHECKPOINT_INTERVAL_MS = 200;

/**
 * The embedded store: bun:sqlite in WAL mode under the data directory. A transaction commits
 * before a call returns, so a server killed with SIGKILL loses nothing it answered for.
 * The SQL lives in ./sqlite/; this class owns the database, its transactions and the announcements.
 */
export class SqliteStore implements Store {
  readonly events = new LocalEvents();
  readonly handsOff = true;
  readonly #requests: LocalRequestCounter;
  readonly #db: Database;
  readonly #sql: SqliteContext;
  #batch: Write[] = [];
  readonly #checkpointer: Worker | undefined;

  constructor(path: string, options: StoreOptions) {
    this.#db = new Database(path, { create: true, strict: true });
    this.#db.run("PRAGMA journal_mode = WAL");
    this.#db.run("PRAGMA synchronous = NORMAL");
    this.#db.run("PRAGMA busy_timeout = 5000");
    // The hot pages of a deep queue (rows, the id index and the other indexes) stay in memory
    // rather than being read back from the OS on every take and result (the default is 2 MB).
    this.#db.run("PRAGMA cache_size = -65536");
    if (path !== ":memory:") {
      // Checkpoints (and the file sync each ends with) run in a thread of their own; this
      // connection checkpoints only if the log ever grows past ~40 MB without one.
      this.#db.run("PRAGMA wal_autocheckpoint = 10000");
      this.#checkpointer = new Worker(URL.createObjectURL(new Blob([checkpointerSource], { type: "application/javascript" })));
      this.#checkpointer.postMessage({ path, intervalMs: CHECKPOINT_INTERVAL_MS });
      this.#checkpointer.unref();
    }
    this.#db
      .transaction(() => {
        const from = (this.#db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
        if (from > SCHEMA_VERSION) throw new Error(`${path} was written by a newer Spool (schema ${from} > ${SCHEMA_VERSION})`);
        this.#db.run(SCHEMA);
        for (let v = Math.max(from, 1) + 1; v <= SCHEMA_VERSION; v++) if (MIGRATIONS[v]) this.#db.run(MIGRATIONS[v]!);
        this.#db.run(`PRAGMA user_version = ${SCHEMA_VERSION}`);
      })
      .immediate();
    this.#sql = new SqliteContext(this.#db, options.retention);
    this.#requests = new LocalRequestCounter(new SqliteRateWindows(this.#db));
  }

  /** Opens (creating if needed) the store file `spool.db` in `dir`. */
  static open(dir: string, options: StoreOptions): SqliteStore {
    if (dir !== ":memory:") mkdirSync(dir, { recursive: true });
    return new SqliteStore(dir === ":memory:" ? dir : join(dir, "spool.db"), options);
  }

  /**
   * Runs `fn` in a transaction shared with every other write asked for in the same turn of the
   * event loop (group commit: one COMMIT for all the requests that arrived together). The promise
   * settles after the COMMIT, so nothing is answered before it is durable; the topics are
   * announced then. A refusal (QueueFullError, IdempotencyConflictError) changes nothing before it throws, so it fails its
   * own call only; any other error rolls the whole transaction back and each write is then run in
   * a transaction of its own, so that one failing changes nothing of the others.
   */
  #tx<T>(fn: (announce: Announce) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#batch.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (this.#batch.length === 1) setImmediate(this.#flush);
    });
  }

  readonly #flush = (): void => {
    const batch = this.#batch;
    this.#batch = [];
    if (!batch.length) return;
    const settled = this.#commit(batch) ?? batch.map((one) => this.#commit([one])![0]!);
    batch.forEach(({ resolve, reject }, i) => {
      const o = settled[i]!;
      if (o.ok) resolve(o.value);
      else reject(o.error);
    });
  };

  /**
   * Runs the writes in one transaction and returns their outcomes; undefined when a write of
   * several failed and rolled them all back. A single write's failure is its outcome.
   */
  #commit(batch: Write[]): Outcome[] | undefined {
    const pending = new Set<string>();
    const announce: Announce = (t) => pending.add(t);
    const outcomes: Outcome[] = [];
    try {
      this.#db.transaction(() => {
        for (const { fn } of batch) {
          try {
            outcomes.push({ ok: true, value: fn(announce) });
          } catch (error) {
            if (!isRefusal(error) || batch.length === 1) throw error;
            outcomes.push({ ok: false, error });
          }
        }
      })();
    } catch (error) {
      // Rolled back: the counts and queues in memory may have moved ahead of the table.
      if (!isRefusal(error)) this.#sql.rolledBack();
      return batch.length === 1 ? [{ ok: false, error }] : undefined;
    }
    for (const t of pending) this.events.emit(t);
    return outcomes;
  }

  async enqueue(job: NewJob, now: number, maxQueued?: number, handTo?: string): Promise<EnqueuedJob> {
    if (job.idempotency)
      return this.#tx((announce) => idempotency.once(this.#sql, job, now, () => this.#enqueue(job, now, announce, maxQueued, handTo)));
    return this.#tx((announce) => this.#enqueue(job, now, announce, maxQueued, handTo));
  }

  async findByIdempotencyKey(keyId: string | undefined, endpointId: string, key: string, now: number): Promise<IdempotencyRecord | null> {
    return idempotency.find(this.#sql, keyId, endpointId, key, now);
  }

  #enqueue(job: NewJob, now: number, announce: Announce, maxQueued?: number, handTo?: string): StoredJob {
    const depth = handTo !== undefined || maxQueued !== undefined ? jobReads.queueDepth(this.#sql, job.endpointId, now) : 0;
    // Straight to a waiting worker only when no live queued job would be passed over.
    if (handTo !== undefined && depth === 0) return jobTransitions.enqueue(this.#sql, job, now, announce, handTo);
    // In the same step as the insert (a refusal throws before changing anything).
    if (maxQueued !== undefined && depth > maxQueued) throw new QueueFullError(depth);
    return jobTransitions.enqueue(this.#sql, job, now, announce);
  }

  async get(endpointId: string, jobId: string, now: number): Promise<StoredJob | null> {
    return jobReads.get(this.#sql, endpointId, jobId, now);
  }

  async setExpiry(endpointId: string, jobId: string, expiresAt: number, now: number): Promise<StoredJob | null> {
    return jobTransitions.setExpiry(this.#sql, endpointId, jobId, expiresAt, now);
  }

  async claim(endpointId: string, workerId: string, max: number, now: number): Promise<StoredJob[]> {
    // Nothing queued: no transaction, so a worker finding the queue empty costs no BEGIN/COMMIT.
    if (this.#sql.index.of(endpointId).queue.size === 0) return [];
    return this.#tx((announce) => jobTransitions.claim(this.#sql, endpointId, workerId, max, now, announce));
  }

  async returnJobs(workerId: string, jobIds: string[], _now: number): Promise<void> {
    if (jobIds.length) await this.#tx((announce) => jobTransitions.returnJobs(this.#sql, workerId, jobIds, announce));
  }

  async progress(workerId: string, jobId: string, value: unknown, now: number): Promise<boolean> {
    return this.#tx((announce) => jobTransitions.progress(this.#sql, workerId, jobId, value, now, announce));
  }

  async appendChunks(workerId: string, jobId: string, chunks: unknown[], now: number): Promise<boolean> {
    return this.#tx((announce) => jobTransitions.appendChunks(this.#sql, workerId, jobId, chunks, now, announce));
  }

  async readStream(endpointId: string, jobId: string, now: number): Promise<StreamRead | null> {
    return this.#tx(() => jobTransitions.readStream(this.#sql, endpointId, jobId, now));
  }

  async readChunks(endpointId: string, jobId: string, from: number, now: number): Promise<StreamRead | null> {
    return jobReads.readChunks(this.#sql, endpointId, jobId, from, now);
  }

  async appendLogs(
    workerId: string,
    jobId: string,
    lines: JobLogLine[],
    maxBytes: number,
    now: number,
  ): Promise<{ truncated: boolean } | null> {
    return this.#tx((announce) => jobLogs.append(this.#sql, workerId, jobId, lines, maxBytes, now, announce));
  }

  async readLogs(endpointId: string, jobId: string, from: number, now: number): Promise<LogRead | null> {
    return jobLogs.read(this.#sql, endpointId, jobId, from, now);
  }

  async finish(
    workerId: string,
    jobId: string,
    result: JobResult,
    streamOutput: boolean,
    now: number,
    cost?: number,
  ): Promise<EndedJob | null> {
    return this.#tx((announce) => jobTransitions.finish(this.#sql, workerId, jobId, result, streamOutput, now, cost, announce));
  }

  async cancel(endpointId: string, jobId: string, now: number): Promise<CancelOutcome | null> {
    return this.#tx((announce) => jobTransitions.cancel(this.#sql, endpointId, jobId, now, announce));
  }

  async retry(endpointId: string, jobId: string, now: number): Promise<RetryOutcome> {
    return this.#tx((announce) => jobTransitions.retry(this.#sql, endpointId, jobId, now, announce));
  }

  async purgeQueue(endpointId: string, now: number): Promise<number> {
    return this.#tx((announce) => jobTransitions.purgeQueue(this.#sql, endpointId, now, announce));
  }

  async failQueued(endpointId: string, error: unknown, now: number, limit: number): Promise<EndedJob[]> {
    return this.#tx((announce) => failQueuedJobs(this.#sql, endpointId, error, now, limit, announce));
  }

  async health(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<HealthResponse> {
    return jobReads.health(this.#sql, endpointId, now, workerLossTimeoutMs);
  }

  async recent(
    endpointId: string,
    now: number,
    limit: number,
    before?: string,
    status?: JobStatus,
  ): Promise<{ jobs: StoredJob[]; next?: string }> {
    return jobReads.recent(this.#sql, endpointId, now, limit, before, status);
  }

  async touchWorker(workerId: string, endpointId: string, keyId: string, now: number, report?: WorkerReport): Promise<WorkerTouch | null> {
    return this.#tx((announce) => duties.touchWorker(this.#sql, workerId, endpointId, keyId, now, report, announce));
  }

  async usage(): Promise<UsageRow[]> {
    return jobReads.usage(this.#sql);
  }

  async scalingStats(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<ScalingStats> {
    return jobReads.scalingStats(this.#sql, endpointId, now, workerLossTimeoutMs);
  }

  async forgetWorker(workerId: string): Promise<void> {
    await this.#tx(() => duties.forgetWorker(this.#sql, workerId));
  }

  async queueDepth(endpointId: string, now: number): Promise<number> {
    return jobReads.queueDepth(this.#sql, endpointId, now);
  }

  async queuePosition(endpointId: string, jobId: string, now: number): Promise<number | null> {
    return jobReads.queuePosition(this.#sql, endpointId, jobId, now);
  }

  async takeDueDeliveries(now: number, leaseMs: number, limit: number): Promise<WebhookDelivery[]> {
    return this.#tx(() => duties.takeDueDeliveries(this.#sql, now, leaseMs, limit));
  }

  async deliveryDone(id: string): Promise<void> {
    duties.deliveryDone(this.#sql, id);
  }

  async deliveryRetry(id: string, nextAt: number): Promise<void> {
    duties.deliveryRetry(this.#sql, id, nextAt);
  }

  async takeStops(workerId: string): Promise<string[]> {
    return duties.takeStops(this.#sql, workerId);
  }

  async sweep(now: number, workerLossTimeoutMs: number): Promise<SweepReport> {
    return this.#tx((announce) => duties.sweep(this.#sql, now, workerLossTimeoutMs, announce));
  }

  admitRequest(bucket: string, limit: RequestLimit, windowMs: number, now: number): Admission {
    return this.#requests.admit(bucket, limit, windowMs, now);
  }

  /** One server owns an embedded store: it always holds every lease. */
  async tryLease(): Promise<boolean> {
    return true;
  }

  async addStartFailure(endpointId: string, failure: StartFailure): Promise<StartFailureRun> {
    return this.#tx((announce) => startFailures.add(this.#sql, endpointId, failure, announce));
  }

  async startFailureRuns(): Promise<Record<string, StartFailureRun>> {
    return startFailures.all(this.#sql);
  }

  async endStartFailures(endpointId: string): Promise<void> {
    await this.#tx((announce) => startFailures.end(this.#sql, endpointId, announce));
  }

  async addKey(key: ApiKeyRecord): Promise<void> {
    apiKeys.add(this.#sql, key);
  }

  async findKey(hash: string): Promise<ApiKeyRecord | null> {
    return apiKeys.find(this.#sql, hash);
  }

  async listKeys(): Promise<ApiKeyRecord[]> {
    return apiKeys.list(this.#sql);
  }

  async revokeKey(idOrName: string, now: number): Promise<boolean> {
    return this.#tx((announce) => apiKeys.revoke(this.#sql, idOrName, now, announce));
  }

  async close(): Promise<void> {
    this.#flush(); // writes already asked for are committed, not dropped
    this.#requests.close();
    const checkpointer = this.#checkpointer;
    if (checkpointer) {
      const stopped = Promise.withResolvers<void>();
      checkpointer.addEventListener("close", () => stopped.resolve());
      checkpointer.postMessage("stop");
      // Bounded: a checkpoint stuck on the disk must not hold the server's exit.
      const bound = setTimeout(stopped.resolve, 2_000);
      await stopped.promise;
      clearTimeout(bound);
      checkpointer.terminate();
    }
    this.#db.close();
  }
}
