import type { JobStatus } from "../../../protocol/limits.ts";
import type { StoredJob } from "../store.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import type { JobRow } from "./sqlite-schema.ts";

type Page = { jobs: StoredJob[]; next?: string };
type ListedRow = JobRow & { rid: number };

/**
 * /requests on the embedded store, at the cost of the page whatever the history: every job of an
 * endpoint through jobs_list, ended ones of one status through jobs_ended (both by rowid, the
 * cursor); running ones through jobs_in_progress (as many as the workers run); queued ones from
 * the in-memory queue, newest first in queue order (a retried job queues again at the back), the
 * cursor being the queue's seq.
 */
export function listJobs(s: SqliteContext, endpointId: string, now: number, limit: number, before?: string, status?: JobStatus): Page {
  if (status === "IN_QUEUE") return listQueued(s, endpointId, now, limit, before);
  const cursor = before === undefined ? Number.MAX_SAFE_INTEGER : Number(before);
  const rows =
    status === undefined
      ? s.db
          .query<ListedRow, [string, number, number, number]>(
            "SELECT rowid AS rid, * FROM jobs INDEXED BY jobs_list WHERE endpoint = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?",
          )
          .all(endpointId, now, cursor, limit + 1)
      : status === "IN_PROGRESS"
        ? s.db
            .query<ListedRow, [string, number, number, number]>(
              `SELECT rowid AS rid, * FROM jobs INDEXED BY jobs_in_progress
               WHERE status = 'IN_PROGRESS' AND endpoint = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?`,
            )
            .all(endpointId, now, cursor, limit + 1)
        : s.db
            .query<ListedRow, [string, string, number, number, number]>(
              `SELECT rowid AS rid, * FROM jobs INDEXED BY jobs_ended
               WHERE endpoint = ? AND status = ? AND status NOT IN ('IN_QUEUE', 'IN_PROGRESS') AND expires_at > ? AND rowid < ?
               ORDER BY rowid DESC LIMIT ?`,
            )
            .all(endpointId, status, now, cursor, limit + 1);
  const page = rows.slice(0, limit);
  const next = rows.length > limit ? String(page[page.length - 1]!.rid) : undefined;
  return { jobs: page.map((r) => s.job(r)), next };
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
