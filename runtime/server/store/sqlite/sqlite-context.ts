import type { Database } from "bun:sqlite";
import { topics } from "../store-events.ts";
import type { StoreOptions, StoredJob } from "../store.ts";
import type { JobRow } from "./sqlite-schema.ts";
import { toJob } from "./sqlite-job-row.ts";
import { JobIndex } from "./sqlite-job-index.ts";

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
  readonly #retention: StoreOptions["retention"];
  #seq: number;
  readonly #active = new Map<string, number>();

  constructor(db: Database, retention: StoreOptions["retention"]) {
    this.db = db;
    this.#retention = retention;
    this.#seq = (db.query("SELECT MAX(seq) AS m FROM jobs").get() as { m: number | null }).m ?? 0;
    this.index = new JobIndex(db);
  }

  /** The queue position of a job enqueued (or requeued by a retry) now. */
  nextSeq(): number {
    return ++this.#seq;
  }

  /** How long a job is kept once it reaches a final state. */
  retentionOf(row: { sync: number }): number {
    return row.sync === 1 ? this.#retention.syncMs : this.#retention.asyncMs;
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
    this.#active.clear();
  }

  /** Tells the worker running a job to stop it. */
  stop(workerId: string | null, jobId: string, announce: Announce): void {
    if (!workerId) return;
    this.db.query("INSERT OR IGNORE INTO stops (worker_id, job_id) VALUES (?, ?)").run(workerId, jobId);
    announce(topics.stop(workerId));
  }

  /** Records the webhook call owed for a job that just reached a final state (its id, or its row as updated). */
  owe(job: string | JobRow, now: number, announce: Announce): StoredJob {
    const stored = toJob(typeof job === "string" ? this.rowById(job) : job);
    if (stored.webhook) {
      this.db
        .query("INSERT INTO webhook_deliveries (id, job_id, url, job, attempts, next_at) VALUES (?, ?, ?, ?, 0, ?)")
        .run(crypto.randomUUID(), stored.id, stored.webhook, JSON.stringify(stored), now);
      announce(topics.webhooks);
    }
    return stored;
  }
}
