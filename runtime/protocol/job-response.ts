import type { JobStatus } from "./limits.ts";

/** Job response of /run, /runsync, /status, /retry, /cancel (times in milliseconds). */
export interface JobResponse {
  id: string;
  status: JobStatus;
  delayTime?: number;
  executionTime?: number;
  output?: unknown;
  error?: unknown;
  workerId?: string;
  /**
   * /status of an IN_QUEUE job: how many queued jobs of the endpoint will be taken before it
   * (0: next). Spool's addition to RunPod's shape; clients that do not know it ignore it.
   */
  queuePosition?: number;
}

export interface StreamResponse {
  id: string;
  status: JobStatus;
  stream: { output: unknown; metrics?: unknown }[];
}

export interface HealthResponse {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  /** idle and running are the specification's; initializing and unhealthy are RunPod's worker states. */
  workers: { idle: number; running: number; initializing: number; unhealthy: number };
}

export interface PurgeResponse {
  removed: number;
  status: "completed";
}
