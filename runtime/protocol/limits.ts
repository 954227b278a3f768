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

/** Most jobs one job-take-batch may ask for: the server refuses more, the worker never asks for more. */
export const MAX_TAKE_BATCH = 64;
/** Longest a server may hold a job-take or stop long-poll open (server.takeWaitMs, stopWaitMs). */
export const LONG_POLL_MAX_MS = 85_000;

/** Job states of the specification; the first three are not final. */
export const JOB_STATES = ["IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;
export type JobStatus = (typeof JOB_STATES)[number];

const FINAL: ReadonlySet<JobStatus> = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);
export const isFinal = (s: JobStatus): boolean => FINAL.has(s);

/** Rate limits of the specification, per endpoint and operation, per 10 s window. */
export const RATE_LIMITS = {
  runsync: { requests: 2000, concurrent: 400 },
  run: { requests: 1000, concurrent: 200 },
  status: { requests: 2000, concurrent: 400 },
  stream: { requests: 2000, concurrent: 400 },
  cancel: { requests: 100, concurrent: 20 },
  "purge-queue": { requests: 2 },
  openai: { requests: 2000, concurrent: 400 },
  requests: { requests: 10, concurrent: 2 },
} as const satisfies Record<string, { requests: number; concurrent?: number }>;
export type RateLimitedOperation = keyof typeof RATE_LIMITS;

/** The 429 backpressure rule: the queue holds more than 50 jobs and more than workersMax * 500. */
export const BACKPRESSURE = { minQueue: 50, perWorker: 500 } as const;
