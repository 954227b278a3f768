import type { Database } from "bun:sqlite";
import { topics } from "../store-events.ts";
import { stringifyWithout } from "../raw-json.ts";
import type { EndedJob, StoreOptions, StoredJob } from "../store.ts";
import type { JobRow, RowidRow } from "./sqlite-schema.ts";
import { toJob } from "./sqlite-job-row.ts";
import { JobIndex } from "./sqlite-job-index.ts";

/**
 * Inputs whose JSON is longer than this are kept in job_inputs rather than in the job's row, so
 * that the job's changes of status do not write them again (SQLite rewrites a row whose size changes).
 */
export const INPUT_APART_CHARS = 2048;

/** Most jobs `running` remembers (far more than workers' slots), inputs of at most INPUT_APART_CHARS each. */
const HOLD_AT_MOST = 10_000;

/** Collects a topic to announce once the transaction commits. */
export type Announce = (topic: string) => void;

/**
 * What the SQL modules of the embedded store share: the open database, the retention
 * settings, the queue sequence, and the row steps several store calls take.
 */
export class SqliteContext {
  readonly db: Database;
  /** Counts and queues in memory, changed in step with the table. */
  readonly index: JobIndex;
  /**
   * Jobs this server handed out (claimed or handed to a waiting take) with their input in their
   * row, as handed out, until they end: finish reads no row for them (sqlite-finish.ts). Every
   * hand-out sets or drops a job's entry and every other way out of IN_PROGRESS drops it (stop,
   * requeued, forgetJob, a second loss); emptied on a rollback. Still a hint: the result's UPDATE
   * checks the row, the start of this holding included.
   */
  readonly running = new Map<string, StoredJob>();
  readonly #retention: StoreOptions["retention"];
  #seq: number;
  readonly #active = new Map<string, number>();
  /** No row's expires_at is below this (-Infinity: not known yet), so reads need not look for expired rows before it. */
  #noExpiryBefore = -Infinity;

  constructor(db: Database, retention: StoreOptions["retention"]) {
    this.db = db;
    this.#retention = retention;
    this.#seq = (db.query("SELECT MAX(seq) AS m FROM jobs").get() as { m: number | null }).m ?? 0;
    this.index = new JobIndex(db);
    this.idempotencyKeys = db.query("SELECT 1 FROM idempotency_keys LIMIT 1").get() !== null;
    this.#stopRows = this.#countStops();
  }

  /** Rows in stops, kept in step with the table (counted again after a rollback): while there are none, a job's end deletes none. */
  #stopRows: number;

  #countStops(): number {
    return (this.db.query("SELECT COUNT(*) AS n FROM stops").get() as { n: number }).n;
  }

  /** Removes the stops owed for a job (it ended or starts again). */
  dropJobStops(jobId: string): void {
    if (this.#stopRows > 0) this.#stopRows -= this.db.query("DELETE FROM stops WHERE job_id = ?").run(jobId).changes;
  }

  /** Removes and returns the jobs a worker was told to stop. */
  takeWorkerStops(workerId: string): string[] {
    if (this.#stopRows <= 0) return [];
    const ids = this.db
      .query<{ job_id: string }, [string]>("DELETE FROM stops WHERE worker_id = ? RETURNING job_id")
      .all(workerId)
      .map((r) => r.job_id);
    this.#stopRows -= ids.length;
    return ids;
  }

  /** Whether any Idempotency-Key may be kept: until one is written, a lookup or a prune has nothing to read. */
  idempotencyKeys: boolean;

  /** The queue position of a job enqueued (or requeued by a retry) now. */
  nextSeq(): number {
    return ++this.#seq;
  }

  /** An expires_at this transaction writes (returned, to bind): the lower bound follows it down. */
  expiring(at: number): number {
    if (at < this.#noExpiryBefore) this.#noExpiryBefore = at;
    return at;
  }

  /**
   * Whether any row has expired and not been swept yet. Usually answered from the lower bound
   * without a statement: a read outside a transaction takes SQLite's read lock, which costs
   * a /run more than the probe itself. Once a probe finds none, the bound is the earliest
   * expiry in the table (one index probe).
   */
  anyExpired(now: number): boolean {
    if (this.#noExpiryBefore > now) return false;
    if (this.db.query<{ x: number }, [number]>("SELECT 1 AS x FROM jobs INDEXED BY jobs_expiry WHERE expires_at <= ? LIMIT 1").get(now))
      return true;
    this.#noExpiryBefore = this.db.query<{ m: number | null }, []>("SELECT MIN(expires_at) AS m FROM jobs").get()?.m ?? Infinity;
    return false;
  }

  /** How long a job is kept once it reaches a final state. */
  retentionOf(row: { sync: number }): number {
    return row.sync === 1 ? this.#retention.syncMs : this.#retention.asyncMs;
  }

  /** A row of `jobs` as a StoredJob (an input kept apart is read when first used). */
  job(row: JobRow): StoredJob {
    return toJob(row, this.#inputApart);
  }

  readonly #inputApart = (jobId: string): string =>
    this.db.query<{ input: string }, [string]>("SELECT input FROM job_inputs WHERE job_id = ?").get(jobId)?.input ?? "null";

  /** The input as the job's row keeps it: its JSON, or '' with the JSON in job_inputs when it is long. */
  storeInput(jobId: string, input: unknown): string {
    const text = JSON.stringify(input);
    if (text.length <= INPUT_APART_CHARS) return text;
    this.db.query("INSERT INTO job_inputs (job_id, input) VALUES (?, ?)").run(jobId, text);
    return "";
  }

  /** Removes what a deleted job kept beside its row (not its Idempotency-Key, kept until its own expiry). */
  forgetJob(jobId: string): void {
    this.running.delete(jobId);
    this.db.query("DELETE FROM stream_chunks WHERE job_id = ?").run(jobId);
    this.db.query("DELETE FROM job_inputs WHERE job_id = ?").run(jobId);
    this.db.query("DELETE FROM job_logs WHERE job_id = ?").run(jobId);
    this.db.query("DELETE FROM job_log_sizes WHERE job_id = ?").run(jobId);
  }

  /** The job's row if it belongs to the endpoint and has not expired. */
  liveRow(endpointId: string, jobId: string, now: number): JobRow | null {
    return this.db
      .query<JobRow, [string, string, number]>("SELECT * FROM jobs WHERE id = ? AND endpoint = ? AND expires_at > ?")
      .get(jobId, endpointId, now);
  }

  /** The row of a job known to exist. */
  rowById(jobId: string): JobRow {
    return this.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?").get(jobId)!;
  }

  /**
   * Records that a worker took or ended a job (workers.last_active, which the scaler reads to
   * stop idle workers): written at most once a second per worker, which that judgement never notices.
   */
  workerActive(workerId: string, now: number): void {
    const last = this.#active.get(workerId);
    if (last !== undefined && now >= last && now - last < 1_000) return;
    if (this.#active.size > 100_000) this.#active.clear(); // bound memory on id churn
    this.#active.set(workerId, now);
    this.db.query("UPDATE workers SET last_active = ? WHERE id = ?").run(now, workerId);
  }

  /** A transaction rolled back: what memory holds beside the table is read again or forgotten. */
  rolledBack(): void {
    this.index.rebuild();
    this.running.clear();
    this.#active.clear();
    this.#noExpiryBefore = -Infinity;
    this.#stopRows = this.#countStops();
  }

  /**
   * A job just handed to a worker (see `running`): remembered when `keep` (its input is in its
   * row, read already), otherwise any entry of an earlier holding is dropped.
   */
  handedOut(job: StoredJob, keep: boolean): void {
    if (!keep) {
      this.running.delete(job.id);
      return;
    }
    if (this.running.size >= HOLD_AT_MOST) this.running.clear(); // more than any workers hold: a leak, not work
    this.running.set(job.id, job);
  }

  /** A running job put back in its queue, in its place (its row already IN_QUEUE): memory and announcements. */
  requeued(row: RowidRow, announce: Announce): void {
    this.running.delete(row.id);
    const { lowPriority } = JSON.parse(row.policy) as StoredJob["policy"];
    this.index.queued(row.endpoint, "IN_PROGRESS", {
      id: row.id,
      seq: row.seq,
      expiresAt: row.expires_at,
      queuedAt: row.queued_at,
      lowPriority,
      rid: row.rid,
      fresh: row.retries === 0,
    });
    announce(topics.job(row.id));
    announce(topics.queue(row.endpoint));
  }

  /** Tells the worker running a job to stop it. */
  stop(workerId: string | null, jobId: string, announce: Announce): void {
    this.running.delete(jobId); // ended (cancelled, timed out, expired) without its result
    if (!workerId) return;
    this.#stopRows += this.db.query("INSERT OR IGNORE INTO stops (worker_id, job_id) VALUES (?, ?)").run(workerId, jobId).changes;
    announce(topics.stop(workerId));
  }

  /**
   * Records the webhook call owed for a job that just reached a final state (its id, or the job as
   * it now is). The call's copy of the job is an EndedJob: its input is neither read nor stored again.
   */
  owe(job: string, now: number, announce: Announce): StoredJob;
  owe<J extends EndedJob>(job: J, now: number, announce: Announce): J;
  owe(job: string | EndedJob, now: number, announce: Announce): EndedJob {
    const stored = typeof job === "string" ? this.job(this.rowById(job)) : job;
    if (stored.webhook) {
      this.db
        .query("INSERT INTO webhook_deliveries (id, job_id, url, job, attempts, next_at) VALUES (?, ?, ?, ?, 0, ?)")
        .run(crypto.randomUUID(), stored.id, stored.webhook, stringifyWithout(stored, "input"), now);
      announce(topics.webhooks);
    }
    return stored;
  }
}
