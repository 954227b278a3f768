import type { Clock } from "../clock.ts";
import { clipMessage, logLineBytes, type JobLogLine, type LogLevel } from "../protocol/job-log.ts";

/** A batch is sent once it holds this much, without waiting for the flush interval. */
const FLUSH_BYTES = 64 * 1024;
/** Lines not yet accepted by the server past this are dropped: a handler that logs faster than the server takes them must not fill the worker's memory. */
const PENDING_MAX_BYTES = 8 * 1024 * 1024;

/** Posts lines of one job; `{truncated: true}` (or null: refused) means the server takes no more. */
export type SendLines = (lines: JobLogLine[]) => Promise<{ truncated: boolean } | null>;

/**
 * One job's log lines on their way to the server, in batches: sent `flushMs` after the first
 * line of a batch, at once past FLUSH_BYTES, and before each of the job's other posts (flush()),
 * so that the server has every line before the job's progress, chunk or result that followed it.
 * Posts go one at a time, in order.
 */
export class JobLogBuffer {
  #lines: JobLogLine[] = [];
  #bytes = 0;
  /** Bytes buffered or in a post not yet answered. */
  #pending = 0;
  #closed = false;
  /** The server takes no more lines of this job (its log is cut, or the job is no longer running here). */
  #refused = false;
  #timer: AbortController | undefined;
  #sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly send: SendLines,
    private readonly clock: Clock,
    private readonly flushMs: number,
  ) {}

  add(level: LogLevel, message: string): void {
    if (this.#closed || this.#refused) return;
    const line: JobLogLine = { time: this.clock.now(), level, message: clipMessage(message) };
    const bytes = logLineBytes(line);
    if (this.#pending + bytes > PENDING_MAX_BYTES) return;
    this.#lines.push(line);
    this.#bytes += bytes;
    this.#pending += bytes;
    if (this.#bytes >= FLUSH_BYTES) void this.flush();
    else if (!this.#timer) {
      const timer = (this.#timer = new AbortController());
      void this.clock.sleep(this.flushMs, timer.signal).then(() => {
        if (!timer.signal.aborted) void this.flush();
      });
    }
  }

  /** Sends what is buffered; resolves once it and every earlier batch were answered. */
  flush(): Promise<void> {
    this.#timer?.abort();
    this.#timer = undefined;
    const lines = this.#lines;
    const bytes = this.#bytes;
    this.#lines = [];
    this.#bytes = 0;
    if (!lines.length) return this.#sending;
    this.#sending = this.#sending.then(async () => {
      try {
        if (this.#refused) return;
        const answer = await this.send(lines);
        if (!answer || answer.truncated) this.#refused = true;
      } finally {
        this.#pending -= bytes;
      }
    });
    return this.#sending;
  }

  /** The job has ended: what is buffered goes, nothing more is taken. */
  async close(): Promise<void> {
    const last = this.flush();
    this.#closed = true;
    await last;
  }
}
