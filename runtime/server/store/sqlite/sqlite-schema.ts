/** Each endpoint's run of failed worker starts (StartFailureRun); `last` is the last failure's JSON. */
const START_FAILURES = `CREATE TABLE IF NOT EXISTS start_failures (
  endpoint TEXT PRIMARY KEY,
  attempts INTEGER NOT NULL,
  first_at INTEGER NOT NULL,
  permanent INTEGER NOT NULL,
  last TEXT NOT NULL
) WITHOUT ROWID;`;

/**
 * Jobs' log lines, and per job how many lines and bytes it holds and whether it reached its
 * limit: removed with their job (SqliteContext.forgetJob), so they share its retention.
 */
const JOB_LOGS = `CREATE TABLE IF NOT EXISTS job_logs (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  time INTEGER NOT NULL,
  level TEXT NOT NULL,
  message TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_log_sizes (
  job_id TEXT PRIMARY KEY,
  lines INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  truncated INTEGER NOT NULL
) WITHOUT ROWID;`;

/** Tables of the embedded store. Versioned through PRAGMA user_version. */
export const SCHEMA_VERSION = 17;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  endpoint TEXT NOT NULL,
  status TEXT NOT NULL,
  seq INTEGER NOT NULL,
  input TEXT NOT NULL,
  webhook TEXT,
  policy TEXT NOT NULL,
  s3_config TEXT,
  sync INTEGER NOT NULL,
  key_id TEXT,
  created_at INTEGER NOT NULL,
  queued_at INTEGER NOT NULL,
  started_at INTEGER,
  completed_at INTEGER,
  expires_at INTEGER NOT NULL,
  deadline INTEGER,
  worker_id TEXT,
  output TEXT,
  error TEXT,
  progress TEXT,
  losses INTEGER NOT NULL DEFAULT 0,
  retries INTEGER NOT NULL DEFAULT 0,
  chunk_count INTEGER NOT NULL DEFAULT 0,
  chunks_read INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_expiry ON jobs(expires_at);
-- Running jobs, by worker: one index for a worker's jobs and for the deadline sweep (which reads
-- every running job: their number is bounded by the workers' slots, not by the queue).
CREATE INDEX IF NOT EXISTS jobs_in_progress ON jobs(worker_id, deadline) WHERE status = 'IN_PROGRESS';
-- Inputs past INPUT_APART_CHARS, kept out of the job's row (whose input is then ''): SQLite writes
-- a whole row again when one of its columns changes size, which every change of status does.
CREATE TABLE IF NOT EXISTS job_inputs (
  job_id TEXT PRIMARY KEY,
  input TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS stream_chunks (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workers (
  id TEXT PRIMARY KEY,
  endpoint TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  running_ids TEXT,
  unhealthy TEXT
);
CREATE TABLE IF NOT EXISTS stops (
  worker_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  PRIMARY KEY (worker_id, job_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS stops_job ON stops(job_id);
CREATE TABLE IF NOT EXISTS counters (
  endpoint TEXT NOT NULL,
  name TEXT NOT NULL,
  value INTEGER NOT NULL,
  PRIMARY KEY (endpoint, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  url TEXT NOT NULL,
  job TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_due ON webhook_deliveries(next_at);
${START_FAILURES}
${JOB_LOGS}
`;

/** Steps from one schema version to the next, run in order on an older file. */
export const MIGRATIONS: Record<number, string> = {
  2: `ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
      ALTER TABLE api_keys ADD COLUMN endpoints TEXT;`,
  3: `ALTER TABLE workers ADD COLUMN last_active INTEGER;`,
  4: `CREATE TABLE IF NOT EXISTS usage (
        key_id TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        jobs INTEGER NOT NULL,
        cost_e10 INTEGER NOT NULL,
        PRIMARY KEY (key_id, endpoint)
      ) WITHOUT ROWID;`,
  // jobs_worker_status and stops_job (in SCHEMA) replace an index that made a worker's running
  // jobs a walk through every job it ever ran.
  5: `DROP INDEX IF EXISTS jobs_worker;`,
  // jobs_deadline (since replaced by jobs_in_progress) holds running jobs only, so a submission or a result no longer
  // updates an index of every job by status.
  6: `DROP INDEX IF EXISTS jobs_running;`,
  // Partial indexes of queued and of running jobs (in SCHEMA): a result no longer moves an entry
  // in an index of every job by status, nor one of every job a worker ever ran.
  7: `DROP INDEX IF EXISTS jobs_queue; DROP INDEX IF EXISTS jobs_worker_status;
      ALTER TABLE jobs ADD COLUMN output_chunk INTEGER NOT NULL DEFAULT 0;`,
  // jobs_in_progress (in SCHEMA) replaces two indexes of running jobs: a take and a result each
  // change one index page fewer.
  8: `DROP INDEX IF EXISTS jobs_deadline; DROP INDEX IF EXISTS jobs_worker_running;`,
  // The queue lives in memory (claims, positions and purges read it), read back from the table
  // when the store opens: a submission and a take each change one index page fewer.
  9: `DROP INDEX IF EXISTS jobs_queued;`,
  // Idempotency-Keys, apart from the jobs' rows (two more columns there made a job's writes a
  // fifth larger in bench-store's hand-off): removed with their job (SqliteContext.forgetJob).
  10: `CREATE TABLE IF NOT EXISTS idempotency_keys (
        scope TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        body_hash TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS idempotency_keys_job ON idempotency_keys(job_id);`,
  // A worker id belongs to the endpoint and key that first used it ('': none recorded yet).
  // /requests reads a page: an endpoint's ended jobs by status (jobs_ended, written once, as a job
  // ends; never by a take).
  11: `ALTER TABLE workers ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
       CREATE INDEX IF NOT EXISTS jobs_ended ON jobs(endpoint, status) WHERE status NOT IN ('IN_QUEUE', 'IN_PROGRESS');`,
  // The origin the submitting client called, for the job's file URLs (null: none recorded).
  12: `ALTER TABLE jobs ADD COLUMN origin TEXT;`,
  // An Idempotency-Key is kept until its own expiry (idempotencyTtlMs), no longer removed with its
  // job: a key written before lives as long as its job would have. The sweep prunes by expiry.
  13: `ALTER TABLE idempotency_keys ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
       UPDATE idempotency_keys SET expires_at = COALESCE((SELECT expires_at FROM jobs WHERE jobs.id = idempotency_keys.job_id), 0);
       DROP INDEX IF EXISTS idempotency_keys_job;
       CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys(expires_at);`,
  // Failed worker starts, kept in the store so that they outlast a restart (and a lease move on Redis).
  14: START_FAILURES,
  // Jobs' log lines (GET /logs), apart from the jobs' rows: a line written never rewrites a job's row.
  15: JOB_LOGS,
  // The traceparent of the job's submit span, while traces are on (null: none).
  16: `ALTER TABLE jobs ADD COLUMN traceparent TEXT;`,
  // An endpoint's page of all its jobs is merged from its queue in memory, its running jobs and
  // its ended ones by status (jobs_ended): an index of every job by endpoint cost each submission
  // a write.
  17: `DROP INDEX IF EXISTS jobs_list;`,
};

/** A row of `jobs` as bun:sqlite returns it. */
export interface JobRow {
  id: string;
  endpoint: string;
  status: string;
  seq: number;
  input: string;
  webhook: string | null;
  policy: string;
  s3_config: string | null;
  sync: number;
  key_id: string | null;
  origin: string | null;
  traceparent: string | null;
  created_at: number;
  queued_at: number;
  started_at: number | null;
  completed_at: number | null;
  expires_at: number;
  deadline: number | null;
  worker_id: string | null;
  output: string | null;
  error: string | null;
  progress: string | null;
  losses: number;
  retries: number;
  chunk_count: number;
  chunks_read: number;
  /** 1: the job's stream is its output column, split as splitChunk does (no stream_chunks rows). */
  output_chunk: number;
}

/** A job's row read with its rowid (`rowid AS rid`): its place among an endpoint's jobs, newest first. */
export type RowidRow = JobRow & { rid: number };
