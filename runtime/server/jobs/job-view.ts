import type { JobResponse } from "../../protocol/job-response.ts";
import { rawJson, stringifyWith } from "../store/raw-json.ts";
import type { EndedJob } from "../store/store.ts";

/**
 * The job response body of the specification. Never includes s3Config, input or webhook.
 * `withOutput: false` leaves out the output (which a large result would have to be parsed for).
 */
export function jobResponse(job: EndedJob, { withOutput = true } = {}): JobResponse {
  const body: JobResponse = { id: job.id, status: job.status };
  if (job.startedAt !== undefined) body.delayTime = job.startedAt - job.queuedAt;
  if (job.startedAt !== undefined && job.completedAt !== undefined) body.executionTime = job.completedAt - job.startedAt;
  if (withOutput && job.status === "COMPLETED") body.output = job.output;
  else if (withOutput && job.status === "IN_PROGRESS" && job.progress !== undefined) body.output = job.progress;
  if (job.error !== undefined) body.error = job.error;
  if (job.workerId !== undefined) body.workerId = job.workerId;
  return body;
}

/**
 * The job response as JSON text, `extra` fields added: a large result goes out as the text it
 * was stored as, never parsed and written again (its key then comes last).
 */
export function jobResponseJson(job: EndedJob, extra?: Partial<JobResponse>): string {
  const raw = job.status === "COMPLETED" ? rawJson(job, "output") : undefined;
  if (raw === undefined) return JSON.stringify(extra ? { ...jobResponse(job), ...extra } : jobResponse(job));
  return stringifyWith({ ...jobResponse(job, { withOutput: false }), ...extra }, "output", raw);
}
