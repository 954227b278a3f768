import { topics } from "../store-events.ts";
import type { EndedJob } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";
import { json, toEndedJob } from "./sqlite-job-row.ts";
import type { JobRow } from "./sqlite-schema.ts";

/** Ends up to `limit` of the endpoint's live queued jobs FAILED with `error` (its workers cannot start), as a result would. */
export function failQueuedJobs(
  s: SqliteContext,
  endpointId: string,
  error: unknown,
  now: number,
  limit: number,
  announce: Announce,
): EndedJob[] {
  // The queue in memory names the queued jobs; expired ones are left to the sweep.
  const queued: { id: string; seq: number }[] = [];
  for (const e of s.index.of(endpointId).queue.inOrder()) {
    if (queued.length === limit) break;
    if (e.expiresAt > now) queued.push(e);
  }
  const text = json(error);
  const read = s.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
  const fail = s.db.query<never, [string | null, number, number, string]>(
    "UPDATE jobs SET status = 'FAILED', error = ?, completed_at = ?, expires_at = ? WHERE id = ?",
  );
  const ended: EndedJob[] = [];
  for (const { id, seq } of queued) {
    const row = read.get(id);
    if (!row || row.endpoint !== endpointId || row.status !== "IN_QUEUE" || row.expires_at <= now) {
      s.index.forget(endpointId, seq); // not queued after all
      continue;
    }
    Object.assign(row, {
      status: "FAILED",
      error: text,
      completed_at: now,
      expires_at: s.expiring(now + s.retentionOf(row)),
    } satisfies Partial<JobRow>);
    fail.run(text, now, row.expires_at, id);
    s.index.unqueued(endpointId, seq, "FAILED");
    announce(topics.job(id));
    ended.push(s.owe(toEndedJob(row), now, announce));
  }
  return ended;
}
