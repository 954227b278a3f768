import { z } from "zod";
import type { Policy, S3Config } from "./job-request.ts";

/** A job as handed to a worker by job-take / job-take-batch. */
export interface TakenJob {
  id: string;
  input: Record<string, unknown>;
  webhook?: string;
  s3Config?: S3Config;
  policy: Required<Policy>;
  /** Epoch ms at which the job times out. */
  deadline: number;
}

/**
 * Body of job-done. runpod-python sends it as form-urlencoded text; it is always parsed as JSON.
 * `{status: "IN_PROGRESS", output}` is a progress update, not a completion.
 */
export const jobDoneSchema = z.object({
  output: z.unknown().optional(),
  error: z.unknown().optional(),
  status: z.string().optional(),
  stopPod: z.boolean().optional(),
});
export type JobDone = z.infer<typeof jobDoneSchema>;

/** Body of job-stream: one chunk per post. */
export const jobStreamSchema = z.object({ output: z.unknown() });

/** Body of a job-stop answer. */
export interface JobStopResponse {
  jobsToStop: string[];
}
