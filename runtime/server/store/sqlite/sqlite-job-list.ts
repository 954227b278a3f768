import type { JobStatus } from "../../../protocol/limits.ts";
import type { StoredJob } from "../store.ts";
import type { QueuedEntry } from "./seq-queue.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import type { JobRow, RowidRow } from "./sqlite-schema.ts";

type Page = { jobs: StoredJob[]; next?: string };

const ENDED = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;

/**
 * /requests on the embedded store, at the cost of the page whatever the history: ended jobs of
 * one status through jobs_ended (by rowid, the cursor); running ones through jobs_in_progress (as
 * many as the workers run); queued ones from the in-memory queue, newest first in queue order (a
 * retried job queues again at the back), the cursor being the queue's seq. Every job, newest
 * (highest rowid) first, is the page merged from the same sources: each gives the rowids of its
 * newest below the cursor, no more than the page, and only the page's rows are read whole.
 */
export function listJobs(s: SqliteContext, endpointId: string, now: number, limit: number, before?: string, status?: JobStatus): Page {
  if (status === "IN_QUEUE") return listQueued(s, endpointId, now, limit, before);
  const cursor = before === undefined ? Number.MAX_SAFE_INTEGER : Number(before);
  const rows =
    status === undefined
      ? listAll(s, endpointId, now, limit + 1, cursor)
      : status === "IN_PROGRESS"
        ? running<RowidRow>(s, "rowid AS rid, *", endpointId, now, limit + 1, cursor)
        : ended<RowidRow>(s, "rowid AS rid, *", endpointId, status, now, limit + 1, cursor);
  const page = rows.slice(0, limit);
  const next = rows.length > limit ? String(page[page.length - 1]!.rid) : undefined;
  return { jobs: page.map((r) => s.job(r)), next };
}

function running<T>(s: SqliteContext, columns: string, endpointId: string, now: number, n: number, cursor: number): T[] {
  return s.db
    .query<T, [string, number, number, number]>(
      `SELECT ${columns} FROM jobs INDEXED BY jobs_in_progress
       WHERE status = 'IN_PROGRESS' AND endpoint = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?`,
    )
    .all(endpointId, now, cursor, n);
}

function ended<T>(s: SqliteContext, columns: string, endpointId: string, status: JobStatus, now: number, n: number, cursor: number): T[] {
  return s.db
    .query<T, [string, string, number, number, number]>(
      `SELECT ${columns} FROM jobs INDEXED BY jobs_ended
       WHERE endpoint = ? AND status = ? AND status NOT IN ('IN_QUEUE', 'IN_PROGRESS') AND expires_at > ? AND rowid < ?
       ORDER BY rowid DESC LIMIT ?`,
    )
    .all(endpointId, status, now, cursor, n);
}

/** The `n` newest jobs below the cursor, whatever their status: each source's `n` newest rowids, merged, then read. */
function listAll(s: SqliteContext, endpointId: string, now: number, n: number, cursor: number): RowidRow[] {
  type Rid = { rid: number };
  const rids = [
    ...newestQueued(s, endpointId, now, n, cursor),
    ...running<Rid>(s, "rowid AS rid", endpointId, now, n, cursor),
    ...ENDED.flatMap((status) => ended<Rid>(s, "rowid AS rid", endpointId, status, now, n, cursor)),
  ]
    .map((r) => r.rid)
    .sort((a, b) => b - a)
    .slice(0, n);
  const read = s.db.query<RowidRow, [number]>("SELECT rowid AS rid, * FROM jobs WHERE rowid = ?");
  return rids.map((rid) => read.get(rid)!);
}

/**
 * The `n` queued jobs with the highest rowids below the cursor. A fresh job's seq and rowid were
 * given together, so the fresh ones below the cursor are those below the seq of the job at the
 * cursor (when it was never retried), newest first; the retried ones, whose rowid is older than
 * their place, are few and read apart.
 */
function newestQueued(s: SqliteContext, endpointId: string, now: number, n: number, cursor: number): QueuedEntry[] {
  const index = s.index.of(endpointId);
  const found: QueuedEntry[] = [];
  for (const entry of index.retried.values()) if (entry.expiresAt > now && entry.rid < cursor) found.push(entry);
  let fresh = 0;
  for (const entry of index.queue.newestFirst(seqBelow(s, cursor))) {
    if (!entry.fresh || entry.expiresAt <= now || entry.rid >= cursor) continue; // expired ones are not swept yet
    found.push(entry);
    if (++fresh === n) break; // the fresh ones further on are older
  }
  return found.sort((a, b) => b.rid - a.rid).slice(0, n);
}

/**
 * A seq below which the fresh queued jobs are exactly those below the cursor: the seq of the job
 * at the cursor's rowid, when it was never retried (whichever job holds that rowid now, every
 * fresh job below it was submitted before it). Otherwise none: the walk starts at the newest.
 */
function seqBelow(s: SqliteContext, cursor: number): number {
  if (cursor === Number.MAX_SAFE_INTEGER) return Infinity;
  const at = s.db.query<{ seq: number; retries: number }, [number]>("SELECT seq, retries FROM jobs WHERE rowid = ?").get(cursor);
  return at && at.retries === 0 ? at.seq : Infinity;
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
