import type { Database } from "bun:sqlite";
import { JOB_STATES, type JobStatus } from "../../../protocol/limits.ts";
import { type QueuedEntry, SeqQueue } from "./seq-queue.ts";

/** Rows of one endpoint by status (expired rows not yet swept included) and its queue. */
export interface EndpointIndex {
  counts: Record<JobStatus, number>;
  queue: SeqQueue;
  /** The queued jobs that are not lowPriority (the oldest of them scales workers up). */
  normal: SeqQueue;
  /** The queued jobs that were retried (not fresh: their rowid is older than their place), by seq. */
  retried: Map<number, QueuedEntry>;
}

const noCounts = (): Record<JobStatus, number> => Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobStatus, number>;

/**
 * What the embedded store keeps in memory beside the table, so that backpressure, health, claim
 * and queue position cost the same at any backlog: per endpoint, the number of rows in each
 * status and the queued jobs in claim order. Built from the table when the store opens (one
 * server owns an embedded store), changed in step with every transaction, and rebuilt when a
 * transaction rolls back.
 */
export class JobIndex {
  readonly #endpoints = new Map<string, EndpointIndex>();
  #keeping = 0;

  constructor(private readonly db: Database) {
    this.rebuild();
  }

  /** The endpoint's index, created empty on first use. */
  of(endpointId: string): EndpointIndex {
    let e = this.#endpoints.get(endpointId);
    if (!e)
      this.#endpoints.set(endpointId, (e = { counts: noCounts(), queue: new SeqQueue(), normal: new SeqQueue(), retried: new Map() }));
    return e;
  }

  /** Queued entries, on every endpoint, that keep their job as written (QueuedEntry.written). */
  get keeping(): number {
    return this.#keeping;
  }

  /** A row moved from one status to another (null: inserted or deleted). */
  move(endpointId: string, from: JobStatus | null, to: JobStatus | null): void {
    const c = this.of(endpointId).counts;
    if (from) c[from]--;
    if (to) c[to]++;
  }

  /** A row became IN_QUEUE (enqueue, retry, a lost worker's job). */
  queued(endpointId: string, from: JobStatus | null, entry: QueuedEntry): void {
    this.move(endpointId, from, "IN_QUEUE");
    const e = this.of(endpointId);
    if (entry.written && !e.queue.get(entry.seq)) this.#keeping++;
    e.queue.add(entry);
    if (!entry.lowPriority) e.normal.add(entry);
    if (!entry.fresh) e.retried.set(entry.seq, entry);
  }

  /** A row left IN_QUEUE (claim, cancel, purge, expiry). */
  unqueued(endpointId: string, seq: number, to: JobStatus | null): void {
    this.move(endpointId, "IN_QUEUE", to);
    this.forget(endpointId, seq);
  }

  /** Drops an entry the table does not hold as queued (never counted as such). */
  forget(endpointId: string, seq: number): void {
    const e = this.of(endpointId);
    if (e.queue.get(seq)?.written) this.#keeping--;
    e.queue.delete(seq);
    e.normal.delete(seq);
    e.retried.delete(seq);
  }

  /** Reads the counts and the queues back from the table. */
  rebuild(): void {
    this.#endpoints.clear();
    this.#keeping = 0;
    const counts = this.db.query<{ endpoint: string; status: JobStatus; n: number }, []>(
      "SELECT endpoint, status, COUNT(*) AS n FROM jobs GROUP BY endpoint, status",
    );
    for (const r of counts.all()) this.of(r.endpoint).counts[r.status] = r.n;
    type Queued = {
      endpoint: string;
      id: string;
      seq: number;
      expires_at: number;
      queued_at: number;
      low: number;
      rid: number;
      retries: number;
    };
    const queued = this.db.query<Queued, []>(
      "SELECT endpoint, id, seq, expires_at, queued_at, COALESCE(json_extract(policy, '$.lowPriority'), 0) AS low, rowid AS rid, retries FROM jobs WHERE status = 'IN_QUEUE' ORDER BY endpoint, seq",
    );
    for (const r of queued.iterate()) {
      const e = this.of(r.endpoint);
      const entry = {
        id: r.id,
        seq: r.seq,
        expiresAt: r.expires_at,
        queuedAt: r.queued_at,
        lowPriority: r.low === 1,
        rid: r.rid,
        fresh: r.retries === 0,
      };
      e.queue.add(entry);
      if (!entry.lowPriority) e.normal.add(entry);
      if (!entry.fresh) e.retried.set(entry.seq, entry);
    }
  }
}
