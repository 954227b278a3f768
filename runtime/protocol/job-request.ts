import { z } from "zod";
import { LIMITS } from "./limits.ts";

/** Execution policy of one job; every bound is the specification's. */
export const policySchema = z.strictObject({
  executionTimeout: z
    .number()
    .int()
    .gt(LIMITS.executionTimeoutMinExclusive, `must be greater than ${LIMITS.executionTimeoutMinExclusive} ms`)
    .max(LIMITS.executionTimeoutMax, `must be at most ${LIMITS.executionTimeoutMax} ms (one week)`)
    .optional(),
  lowPriority: z.boolean().optional(),
  ttl: z
    .number()
    .int()
    .min(LIMITS.ttlMin, `must be at least ${LIMITS.ttlMin} ms`)
    .max(LIMITS.ttlMax, `must be at most ${LIMITS.ttlMax} ms (one week)`)
    .optional(),
});
export type Policy = z.infer<typeof policySchema>;

/** Object-storage settings handed to the worker, never echoed. */
export const s3ConfigSchema = z.object({
  accessId: z.string().min(1),
  accessSecret: z.string().min(1),
  bucketName: z.string().min(1),
  endpointUrl: z.string().url(),
  objectPath: z.string().optional(),
});
export type S3Config = z.infer<typeof s3ConfigSchema>;

const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), "must be an http(s) URL");

/** Body of POST /run and POST /runsync. Unknown top-level fields (e.g. webhookV2) are ignored. */
export const jobRequestSchema = z.object({
  input: z.record(z.string(), z.unknown(), {
    error: (issue) => (issue.input === undefined ? "is required" : "must be a JSON object"),
  }),
  webhook: httpUrl.optional(),
  policy: policySchema.optional(),
  s3Config: s3ConfigSchema.optional(),
});
export type JobRequest = z.infer<typeof jobRequestSchema>;

/** Turns zod issues into one message that names each field, e.g. "policy.ttl: must be at least 10000 ms". */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => {
      const field = i.path.join(".");
      return field ? `${field}: ${i.message}` : i.message;
    })
    .join("; ");
}
