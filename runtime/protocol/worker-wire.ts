import { z } from "zod";
import { policySchema, s3ConfigSchema } from "./job-request.ts";

/** A job as handed to a worker by job-take (one) / job-take-batch (a list). */
export const takenJobSchema = z.object({
  id: z.string(),
  input: z.record(z.string(), z.unknown()),
  webhook: z.string().optional(),
  s3Config: s3ConfigSchema.optional(),
  policy: policySchema.required(),
  /** Epoch ms at which the job times out. */
  deadline: z.number(),
  /** W3C traceparent of the job's submit span, while the server's traces are on: the handler's span is its child. runpod-python ignores it. */
  traceparent: z.string().optional(),
});
export type TakenJob = z.infer<typeof takenJobSchema>;

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

/** Body of a job-stop answer: jobs the worker must stop (cancelled, timed out, expired). */
export const jobStopResponseSchema = z.object({ jobsToStop: z.array(z.string()) });
export type JobStopResponse = z.infer<typeof jobStopResponseSchema>;

/** Answer of a job-files upload: the URL the file is served at. */
export const fileUploadResponseSchema = z.object({ url: z.string() });
export type FileUploadResponse = z.infer<typeof fileUploadResponseSchema>;
