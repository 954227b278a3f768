import type { JobResponse } from "../protocol/job-response.ts";
import type { StoredJob } from "./store/store.ts";

/** The job response body of the specification. Never includes s3Config, input or webhook. */
export function jobResponse(job: StoredJob): JobResponse {
  const body: JobResponse = { id: job.id, status: job.status };
  if (job.startedAt !== undefined) body.delayTime = job.startedAt - job.queuedAt;
  if (job.startedAt !== undefined && job.completedAt !== undefined) body.executionTime = job.completedAt - job.startedAt;
  if (job.status === "COMPLETED") body.output = job.output;
  else if (job.status === "IN_PROGRESS" && job.progress !== undefined) body.output = job.progress;
  if (job.error !== undefined) body.error = job.error;
  if (job.workerId !== undefined) body.workerId = job.workerId;
  return body;
}
