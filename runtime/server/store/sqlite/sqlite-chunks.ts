import { outputPieces } from "../../../protocol/stream-chunks.ts";
import type { SqliteContext } from "./sqlite-context.ts";
import type { JobRow } from "./sqlite-schema.ts";

// A job's stream on the embedded store: rows of stream_chunks, or (output_chunk = 1) its output
// column read in pieces as splitChunk cuts it.

/** Inserts stream chunks as rows, numbered from `from`. */
export function insertChunks(s: SqliteContext, jobId: string, from: number, chunks: unknown[]): void {
  const insert = s.db.query("INSERT INTO stream_chunks (job_id, seq, data) VALUES (?, ?, ?)");
  chunks.forEach((c, i) => insert.run(jobId, from + i, JSON.stringify(c ?? null)));
}

/** The job's stream chunks from index `from` on: pieces of its output when that is its stream, else rows. */
export function chunksOf(s: SqliteContext, row: JobRow, from: number): unknown[] {
  if (from >= row.chunk_count) return [];
  if (row.output_chunk === 1) return outputPieces(row.output === null ? null : JSON.parse(row.output), row.chunk_count, from);
  return s.db
    .query<{ data: string }, [string, number]>("SELECT data FROM stream_chunks WHERE job_id = ? AND seq >= ? ORDER BY seq")
    .all(row.id, from)
    .map((c) => JSON.parse(c.data));
}

/** Appends streamed chunks after the `from` already stored and counts them on the job. */
export function appendChunkRows(s: SqliteContext, jobId: string, from: number, chunks: unknown[]): void {
  insertChunks(s, jobId, from, chunks);
  s.db.query("UPDATE jobs SET chunk_count = chunk_count + ? WHERE id = ?").run(chunks.length, jobId);
}
