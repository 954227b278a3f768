import { z } from "zod";
import { JOB_STATES } from "./limits.ts";

/** A job's state: IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED, TIMED_OUT. */
export const jobStatusSchema = z.enum(JOB_STATES);

/** Job response of /runsync, /status, /status-sync and webhook calls (times in milliseconds). */
export const jobResponseSchema = z.object({
  id: z.string(),
  status: jobStatusSchema,
  /** Milliseconds from entering the queue to being taken. */
  delayTime: z.number().optional(),
  /** Milliseconds from being taken to the final state. */
  executionTime: z.number().optional(),
  /** The handler's output (COMPLETED), or its last progress value (IN_PROGRESS). */
  output: z.unknown().optional(),
  error: z.unknown().optional(),
  workerId: z.string().optional(),
  /**
   * /status of an IN_QUEUE job: how many queued jobs of the endpoint will be taken before it
   * (0: next). Spool's addition to RunPod's shape; clients that do not know it ignore it.
   */
  queuePosition: z.number().int().min(0).optional(),
});
export type JobResponse = z.infer<typeof jobResponseSchema>;

/** Answer of /run, /cancel, /retry, and of /runsync when the job is not done in time. */
export const jobStateSchema = z.object({ id: z.string(), status: jobStatusSchema });
export type JobState = z.infer<typeof jobStateSchema>;

/** One /stream element: a yielded value as {output}, or a chunk that carries its own metrics. */
export const streamElementSchema = z.object({ output: z.unknown(), metrics: z.unknown().optional() });

export const streamResponseSchema = z.object({
  id: z.string(),
  status: jobStatusSchema,
  /** Chunks no earlier /stream call returned, oldest first. */
  stream: z.array(streamElementSchema),
});
export type StreamResponse = z.infer<typeof streamResponseSchema>;

const count = z.number().int().min(0);

/** error_type (RunPod's error shape) of a job failed because no worker of its endpoint could start. */
export const WORKER_START_ERROR_TYPE = "WorkerStartError";

/** Why the endpoint's workers fail to start (extra /health field; RunPod clients ignore it). */
export const startErrorReportSchema = z.object({
  /** The last error line the worker wrote, and how it ended. */
  message: z.string(),
  /** ISO time of the last failed start. */
  at: z.string(),
  /** Consecutive failed starts since a worker was last ready. */
  attempts: count,
  exitCode: z.number().int().optional(),
  signal: z.string().optional(),
  /** A failure of the run cannot pass by retrying (the handler cannot load, or setup said so). */
  permanent: z.boolean(),
  /**
   * The endpoint refuses work: queued jobs were failed and submissions answer 503 (a permanent
   * failure, or startFailureLimit failures over startFailureWindowMs; never with "queue").
   */
  refusing: z.boolean(),
  /** What the endpoint does at the limit: fail its jobs, or keep them queued. */
  onStartFailure: z.enum(["fail", "queue"]),
});
export type StartErrorReport = z.infer<typeof startErrorReportSchema>;

/** Why the scaler starts fewer workers than the endpoint wants (extra /health field). */
export const scaleUpHoldSchema = z.object({
  /** gpu: no GPU has room for another worker. */
  reason: z.enum(["gpu"]),
  /** Workers wanted and not started. */
  workers: count,
  message: z.string(),
});
export type ScaleUpHold = z.infer<typeof scaleUpHoldSchema>;

export const healthResponseSchema = z.object({
  jobs: z.object({ completed: count, failed: count, inProgress: count, inQueue: count, retried: count }),
  /**
   * idle and running are the specification's; initializing and unhealthy are RunPod's worker
   * states; failing counts consecutive failed starts (present while workers fail to start);
   * stopping: processes this server's scaler is ending (idle stop, a job past its deadline) that
   * have not exited yet, present only while there are some.
   */
  workers: z.object({
    idle: count,
    running: count,
    initializing: count,
    unhealthy: count,
    failing: count.optional(),
    stopping: count.optional(),
  }),
  lastStartError: startErrorReportSchema.optional(),
  /** Present while a scale-up waits (on the server that runs scaling). */
  scaleUpHeld: scaleUpHoldSchema.optional(),
  /**
   * For an endpoint whose workers this server starts: how they are confined. "none": its
   * handlers run with the server's rights (no bubblewrap here, or server.sandbox = "none").
   */
  sandbox: z.enum(["bubblewrap", "none"]).optional(),
});
export type HealthResponse = z.infer<typeof healthResponseSchema>;

export const purgeResponseSchema = z.object({ removed: count, status: z.literal("completed") });
export type PurgeResponse = z.infer<typeof purgeResponseSchema>;

/** A page of /requests: recent jobs of the endpoint, newest first. */
export const requestsPageSchema = z.object({
  requests: z.array(jobResponseSchema.extend({ createdAt: z.string(), sync: z.boolean() })),
  /** Pass as ?cursor= for the next page; absent on the last one. */
  nextCursor: z.string().optional(),
});
export type RequestsPage = z.infer<typeof requestsPageSchema>;

/** Every error of the job API and the worker protocol. */
export const errorResponseSchema = z.object({ error: z.string() });
