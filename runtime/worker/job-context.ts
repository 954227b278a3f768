import type { HandlerContext, HandlerLog } from "../../sdk/define-handler.ts";
import type { Log } from "../log.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import { checkFileName, toBlob, uploadToS3 } from "../protocol/uploads.ts";

/** Where a file goes when the job has no s3Config: the server's file store, or a local folder. */
export type FileSink = (jobId: string, name: string, data: Blob, contentType: string) => Promise<string>;

export function jobLog(log: Log, jobId: string): HandlerLog {
  return {
    info: (m, f) => log.info(m, { jobId, ...f }),
    warn: (m, f) => log.warn(m, { jobId, ...f }),
    error: (m, f) => log.error(m, { jobId, ...f }),
  };
}

/** Builds the ctx a handler receives for one job. */
export function jobContext(options: {
  job: TakenJob;
  workerId: string;
  signal: AbortSignal;
  log: Log;
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
    log: jobLog(options.log, job.id),
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
  };
}

/** Reasons ctx.signal fires with; handlers can tell them apart by `name`. */
export const stopReasons = {
  cancelled: () => Object.assign(new Error("the job was cancelled"), { name: "JobCancelled" }),
  timedOut: (ms: number) => Object.assign(new Error(`execution timeout of ${ms} ms reached`), { name: "JobTimedOut" }),
  shutdown: () => Object.assign(new Error("the worker is shutting down"), { name: "WorkerShutdown" }),
};
