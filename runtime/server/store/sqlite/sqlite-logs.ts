import { fitLines, type JobLogLine, type LogLevel } from "../../../protocol/job-log.ts";
import { topics } from "../store-events.ts";
import type { LogRead } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";

interface SizeRow {
  lines: number;
  bytes: number;
  truncated: number;
}

/** A job's log lines on the embedded store: rows of job_logs, counted in job_log_sizes. */
export const jobLogs = {
  append(
    s: SqliteContext,
    workerId: string,
    jobId: string,
    lines: JobLogLine[],
    maxBytes: number,
    now: number,
    announce: Announce,
  ): { truncated: boolean } | null {
    const running = s.db
      .query<{ x: number }, [string, string, number]>(
        "SELECT 1 AS x FROM jobs WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' AND expires_at > ?",
      )
      .get(jobId, workerId, now);
    if (!running) return null;
    const size = s.db.query<SizeRow, [string]>("SELECT lines, bytes, truncated FROM job_log_sizes WHERE job_id = ?").get(jobId) ?? {
      lines: 0,
      bytes: 0,
      truncated: 0,
    };
    if (size.truncated || !lines.length) return { truncated: size.truncated === 1 };
    const fit = fitLines(lines, size.bytes, maxBytes, now);
    const insert = s.db.query("INSERT INTO job_logs (job_id, seq, time, level, message) VALUES (?, ?, ?, ?, ?)");
    fit.keep.forEach((l, i) => insert.run(jobId, size.lines + i, l.time, l.level, l.message));
    s.db
      .query(
        `INSERT INTO job_log_sizes (job_id, lines, bytes, truncated) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (job_id) DO UPDATE SET lines = ?2, bytes = ?3, truncated = ?4`,
      )
      .run(jobId, size.lines + fit.keep.length, fit.used, fit.truncated ? 1 : 0);
    announce(topics.job(jobId));
    return { truncated: fit.truncated };
  },

  read(s: SqliteContext, endpointId: string, jobId: string, from: number, now: number): LogRead | null {
    if (!s.liveRow(endpointId, jobId, now)) return null;
    const lines = s.db
      .query<{ time: number; level: LogLevel; message: string }, [string, number]>(
        "SELECT time, level, message FROM job_logs WHERE job_id = ? AND seq >= ? ORDER BY seq",
      )
      .all(jobId, from)
      .map((r) => ({ time: r.time, level: r.level, message: r.message }));
    const size = s.db.query<Pick<SizeRow, "truncated">, [string]>("SELECT truncated FROM job_log_sizes WHERE job_id = ?").get(jobId);
    return { lines, truncated: size?.truncated === 1 };
  },
};
