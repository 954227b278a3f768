/** Numbers fixed by the job API specification (shared/spec/job-api.md, "Limits"). */
export const LIMITS = {
  executionTimeoutMinExclusive: 5_000,
  executionTimeoutMax: 7 * 24 * 3600_000,
  executionTimeoutDefault: 600_000,
  ttlMin: 10_000,
  ttlMax: 7 * 24 * 3600_000,
  ttlDefault: 86_400_000,
  syncRetention: 60_000,
  asyncRetention: 30 * 60_000,
  runsyncWaitMin: 1_000,
  runsyncWaitMax: 300_000,
  runsyncWaitDefault: 90_000,
  streamChunkBytes: 1_000_000,
  /** Largest request body of POST /run and POST /runsync. */
  runBodyBytes: 10 * 1024 * 1024,
  runsyncBodyBytes: 20 * 1024 * 1024,
} as const;

/** Job states of the specification; the first three are not final. */
export const JOB_STATES = ["IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;
export type JobStatus = (typeof JOB_STATES)[number];

const FINAL: ReadonlySet<JobStatus> = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);
export const isFinal = (s: JobStatus): boolean => FINAL.has(s);
