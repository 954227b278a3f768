import type { HandlerContext, HandlerLog } from "../../sdk/define-handler.ts";
import type { Log } from "../log.ts";
import type { LogLevel } from "../protocol/job-log.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import { checkFileName, toBlob, uploadToS3 } from "../protocol/uploads.ts";
import { tracing } from "../telemetry/tracing.ts";

/** Where a file goes when the job has no s3Config: the server's file store, or a local folder. */
export type FileSink = (jobId: string, name: string, data: Blob, contentType: string) => Promise<string>;

/** A line for the job's own log (GET /logs); none where the job has no log to send to. */
export type JobLine = (level: LogLevel, message: string) => void;

/** ctx.log: each line goes to the process's log with the job's id, and to the job's own log. */
export function jobLog(log: Log, jobId: string, line?: JobLine): HandlerLog {
  const both = (level: "info" | "warn" | "error") => (m: string, f?: Record<string, unknown>) => {
    log[level](m, { jobId, ...f });
    line?.(level, f && Object.keys(f).length ? `${m} ${safeJson(f)}` : m);
  };
  return { info: both("info"), warn: both("warn"), error: both("error") };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** Builds the ctx a handler receives for one job. */
export function jobContext(options: {
  job: TakenJob;
  workerId: string;
  signal: AbortSignal;
  log: Log;
  /** The job's own log (ctx.log's lines go there too). */
  line?: JobLine;
  progress: (value: unknown) => Promise<unknown>;
  files: FileSink;
  onRefresh: () => void;
  handlerOptions: unknown;
}): HandlerContext {
  const { job } = options;
  return {
    options: options.handlerOptions,
    signal: options.signal,
    workerId: options.workerId,
    log: jobLog(options.log, job.id, options.line),
    async progress(value) {
      await options.progress(value);
    },
    async upload(name, data, contentType = "application/octet-stream") {
      checkFileName(name);
      const blob = toBlob(data, contentType);
      if (job.s3Config) return uploadToS3(job.s3Config, job.id, name, blob, contentType);
      return options.files(job.id, name, blob, contentType);
    },
    refreshWorker: options.onRefresh,
    async span(name, fn) {
      return tracing ? tracing.child(name, fn) : fn();
    },
  };
}

/** Reasons ctx.signal fires with; handlers can tell them apart by `name`. */
export const stopReasons = {
  cancelled: () => Object.assign(new Error("the job was cancelled"), { name: "JobCancelled" }),
  timedOut: (ms: number) => Object.assign(new Error(`execution timeout of ${ms} ms reached`), { name: "JobTimedOut" }),
  shutdown: () => Object.assign(new Error("the worker is shutting down"), { name: "WorkerShutdown" }),
};
