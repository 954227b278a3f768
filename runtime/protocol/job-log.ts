import { z } from "zod";

/**
 * Where a job's log line came from: a level of console / ctx.log, or a write to the worker's
 * stdout or stderr that no level names.
 */
export const LOG_LEVELS = ["debug", "info", "warn", "error", "stdout", "stderr"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Longest message one line keeps; the rest of it is cut (with a note that says so). */
export const MAX_LOG_MESSAGE_CHARS = 16 * 1024;

/** One line a job's handler wrote, as workers send it and GET /logs answers it. `time`: epoch ms. */
export const jobLogLineSchema = z.object({
  time: z.number().int().nonnegative(),
  level: z.enum(LOG_LEVELS),
  message: z.string(),
});
export type JobLogLine = z.infer<typeof jobLogLineSchema>;

/** Body of job-log: lines of one job, oldest first. */
export const jobLogPostSchema = z.object({ logs: z.array(jobLogLineSchema).max(10_000) });
export type JobLogPost = z.infer<typeof jobLogPostSchema>;

/** Answer of job-log: `truncated` once the job's log reached its limit (later lines are not kept). */
export const jobLogPostAnswerSchema = z.object({ truncated: z.boolean() });
export type JobLogPostAnswer = z.infer<typeof jobLogPostAnswerSchema>;

/** Answer of GET /v2/<endpoint>/logs/<id>: the lines from `since` on, and whether lines were cut. */
export const jobLogsResponseSchema = z.object({
  id: z.string(),
  logs: z.array(jobLogLineSchema),
  truncated: z.boolean().describe("The log reached server.logMaxBytes: its last line says so, and later lines were not kept"),
});
export type JobLogsResponse = z.infer<typeof jobLogsResponseSchema>;

/** What a line weighs against the job's log limit: its message's UTF-8 bytes and a little for its time and level. */
export const logLineBytes = (line: JobLogLine): number => utf8Length(line.message) + 16;

/** UTF-8 bytes of a string, counted without encoding it (a lone surrogate counts as 3, as it is written). */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** The one line that closes a job's log at its limit. */
export function cutLine(time: number, maxBytes: number): JobLogLine {
  return { time, level: "warn", message: `log limit of ${maxBytes} bytes reached: later lines of this job are not kept` };
}

/** Short messages as they are; a long one cut, saying how much. */
export function clipMessage(message: string): string {
  if (message.length <= MAX_LOG_MESSAGE_CHARS) return message;
  return `${message.slice(0, MAX_LOG_MESSAGE_CHARS)}… (${message.length - MAX_LOG_MESSAGE_CHARS} more characters cut)`;
}

/**
 * The lines of a batch a job's log keeps, given the bytes it holds already: all of them while
 * they fit in `maxBytes`; from the first that does not, one cutLine instead, and `truncated`.
 */
export function fitLines(
  lines: JobLogLine[],
  used: number,
  maxBytes: number,
  now: number,
): { keep: JobLogLine[]; used: number; truncated: boolean } {
  const keep: JobLogLine[] = [];
  for (const line of lines) {
    const bytes = logLineBytes(line);
    if (used + bytes > maxBytes) {
      keep.push(cutLine(now, maxBytes));
      return { keep, used, truncated: true };
    }
    used += bytes;
    keep.push(line);
  }
  return { keep, used, truncated: false };
}
