import type { JobStatus } from "../../../protocol/limits.ts";
import type { StoredJob } from "../store.ts";
import type { QueuedEntry } from "./seq-queue.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import type { JobRow } from "./sqlite-schema.ts";

type Page = { jobs: StoredJob[]; next?: string };
type ListedRow = JobRow & { rid: number };

const ENDED = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;

/**
 * /requests on the embedded store, at the cost of the page whatever the history: ended jobs of
 * one status through jobs_ended (by rowid, the cursor); running ones through jobs_in_progress (as
 * many as the workers run); queued ones from the in-memory queue, newest first in queue order (a
 * retried job queues again at the back), the cursor being the queue's seq. Every job, newest
 * (highest rowid) first, is the page merged from the same sources, each read no further than
 * the page.
 */
export function listJobs(s: SqliteContext, endpointId: string, now: number, limit: number, before?: string, status?: JobStatus): Page {
  if (status === "IN_QUEUE") return listQueued(s, endpointId, now, limit, before);
  const cursor = before === undefined ? Number.MAX_SAFE_INTEGER : Number(before);
  const rows =
    status === undefined
      ? listAll(s, endpointId, now, limit + 1, cursor)
      : status === "IN_PROGRESS"
        ? running(s, endpointId, now, limit + 1, cursor)
        : ended(s, endpointId, status, now, limit + 1, cursor);
  const page = rows.slice(0, limit);
  const next = rows.length > limit ? String(page[page.length - 1]!.rid) : undefined;
  return { jobs: page.map((r) => s.job(r)), next };
}

function running(s: SqliteContext, endpointId: string, now: number, n: number, cursor: number): ListedRow[] {
  return s.db
    .query<ListedRow, [string, number, number, number]>(
      `SELECT rowid AS rid, * FROM jobs INDEXED BY jobs_in_progress
       WHERE status = 'IN_PROGRESS' AND endpoint = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?`,
    )
    .all(endpointId, now, cursor, n);
}

function ended(s: SqliteContext, endpointId: string, status: JobStatus, now: number, n: number, cursor: number): ListedRow[] {
  return s.db
    .query<ListedRow, [string, string, number, number, number]>(
      `SELECT rowid AS rid, * FROM jobs INDEXED BY jobs_ended
       WHERE endpoint = ? AND status = ? AND status NOT IN ('IN_QUEUE', 'IN_PROGRESS') AND expires_at > ? AND rowid < ?
       ORDER BY rowid DESC LIMIT ?`,
    )
    .all(endpointId, status, now, cursor, n);
}

/** The `n` newest jobs below the cursor, whatever their status: each source's `n` newest, merged. */
function listAll(s: SqliteContext, endpointId: string, now: number, n: number, cursor: number): ListedRow[] {
  const queued = newestQueued(s, endpointId, now, n, cursor);
  const rows = [...running(s, endpointId, now, n, cursor), ...ENDED.flatMap((status) => ended(s, endpointId, status, now, n, cursor))];
  const merged: (ListedRow | QueuedEntry)[] = [...rows, ...queued].sort((a, b) => b.rid - a.rid).slice(0, n);
  const read = s.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
  return merged.map((r) => ("status" in r ? r : { ...read.get(r.id)!, rid: r.rid }));
}

/**
 * The `n` queued jobs with the highest rowids below the cursor. The queue is walked newest first
 * by seq, which follows the rowid but for retried jobs (a new seq, their old rowid): every job
 * behind a fresh one was submitted before it, so the walk ends at a fresh job once `n` found are
 * at least as new.
 */
function newestQueued(s: SqliteContext, endpointId: string, now: number, n: number, cursor: number): QueuedEntry[] {
  const found: QueuedEntry[] = [];
  for (const entry of s.index.of(endpointId).queue.newestFirst()) {
    if (entry.expiresAt <= now) continue; // expired, not swept yet
    if (entry.rid < cursor) found.push(entry);
    if (entry.fresh && found.length >= n && found.filter((f) => f.rid >= entry.rid).length >= n) break;
  }
  return found.sort((a, b) => b.rid - a.rid).slice(0, n);
}

function listQueued(s: SqliteContext, endpointId: string, now: number, limit: number, before?: string): Page {
  const jobs: StoredJob[] = [];
  let last = 0;
  const row = s.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
  for (const entry of s.index.of(endpointId).queue.newestFirst(before === undefined ? Infinity : Number(before))) {
    if (entry.expiresAt <= now) continue; // expired, not swept yet
    if (jobs.length === limit) return { jobs, next: String(last) };
    jobs.push(s.job(row.get(entry.id)!));
    last = entry.seq;
  }
  return { jobs };
}
