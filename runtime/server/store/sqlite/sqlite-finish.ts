import { splitChunk } from "../../../protocol/stream-chunks.ts";
import { topics } from "../store-events.ts";
import { RAW_JSON_CHARS, setJson } from "../raw-json.ts";
import type { EndedJob, JobResult } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";
import { json, toEndedJob } from "./sqlite-job-row.ts";
import type { JobRow } from "./sqlite-schema.ts";

/**
 * A worker's result: ends the job if the worker still holds it (idempotent: a repeated or late
 * post changes nothing and returns null). The job as the claim handed it out, when this server
 * remembers it (SqliteContext.running), spares reading its row: the UPDATE's own conditions
 * then decide whether the worker still holds it, and compute what depends on the row (its
 * stream's pieces, its retention) from the row as it is.
 */
export function finishJob(
  s: SqliteContext,
  workerId: string,
  jobId: string,
  result: JobResult,
  streamOutput: boolean,
  now: number,
  cost: number | undefined,
  announce: Announce,
): EndedJob | null {
  const failed = "error" in result;
  const output = "error" in result ? null : json(result.output);
  const error = "error" in result ? json(result.error) : null;
  // A job that streamed nothing has its output as its stream: the pieces are read from the
  // output column (output_chunk = 1), never written a second time as stream_chunks rows.
  const pieces = streamOutput && output !== null && !("error" in result) ? splitChunk(result.output, undefined, output).length : 0;
  const status = failed ? "FAILED" : "COMPLETED";
  const held = s.running.get(jobId);
  let ended: EndedJob;
  let keyId: string | undefined;
  if (held && held.workerId === workerId && held.startedAt !== undefined) {
    s.running.delete(jobId); // ended now, or not this worker's any more
    const expiresAt = s.expiring(now + s.retentionOf({ sync: held.sync ? 1 : 0 }));
    const changed = s.db
      .query<never, [string, string | null, string | null, number, number, number, string, string, number, number]>(
        `UPDATE jobs SET status = ?1, output = ?2, error = ?3, progress = NULL, completed_at = ?4, deadline = NULL, expires_at = ?5,
           output_chunk = (chunk_count = 0 AND ?6 > 0), chunk_count = CASE WHEN chunk_count = 0 THEN ?6 ELSE chunk_count END
         WHERE id = ?7 AND worker_id = ?8 AND status = 'IN_PROGRESS' AND expires_at > ?9 AND started_at = ?10`,
      )
      .run(status, output, error, now, expiresAt, pieces, jobId, workerId, now, held.startedAt).changes;
    if (!changed) return null;
    const parsedError = error === null ? undefined : JSON.parse(error);
    const { input: _input, ...rest } = held; // held only with its input in its row, parsed already
    ended = {
      ...rest,
      status,
      output: undefined,
      error: parsedError,
      progress: undefined,
      completedAt: now,
      deadline: undefined,
      expiresAt,
    };
    // As a row read back gives it: a long output keeps its text for the answers that carry it.
    if (output !== null && output.length >= RAW_JSON_CHARS) setJson(ended, "output", output);
    else if (!("error" in result)) ended.output = result.output;
    keyId = held.keyId;
  } else {
    // Read, then change by id (cheaper than an UPDATE ... RETURNING).
    const row = s.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?").get(jobId);
    if (!row || row.worker_id !== workerId || row.status !== "IN_PROGRESS" || row.expires_at <= now) return null;
    Object.assign(row, {
      status,
      output,
      error,
      progress: null,
      completed_at: now,
      deadline: null,
      expires_at: s.expiring(now + s.retentionOf(row)),
      output_chunk: row.chunk_count === 0 && pieces > 0 ? 1 : 0,
      chunk_count: row.chunk_count === 0 ? pieces : row.chunk_count,
    } satisfies Partial<JobRow>);
    s.db
      .query<JobRow, [string, string | null, string | null, number, number, number, number, string]>(
        `UPDATE jobs SET status = ?1, output = ?2, error = ?3, progress = NULL, completed_at = ?4, deadline = NULL,
           expires_at = ?5, output_chunk = ?6, chunk_count = ?7 WHERE id = ?8`,
      )
      .run(row.status, row.output, row.error, now, row.expires_at, row.output_chunk, row.chunk_count, jobId);
    ended = toEndedJob(row);
    keyId = row.key_id ?? undefined;
    s.running.delete(jobId);
  }
  s.index.move(ended.endpointId, "IN_PROGRESS", status);
  s.workerActive(workerId, now);
  s.dropJobStops(jobId);
  if (!failed && cost !== undefined && keyId) {
    s.db
      .query(
        `INSERT INTO usage (key_id, endpoint, jobs, cost_e10) VALUES (?1, ?2, 1, ?3)
         ON CONFLICT (key_id, endpoint) DO UPDATE SET jobs = jobs + 1, cost_e10 = cost_e10 + ?3`,
      )
      .run(keyId, ended.endpointId, Math.round(cost * 1e10));
  }
  announce(topics.job(jobId));
  return s.owe(ended, now, announce);
}
