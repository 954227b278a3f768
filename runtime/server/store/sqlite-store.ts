import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { JobStatus } from "../../protocol/limits.ts";
import type { HealthResponse } from "../../protocol/job-response.ts";
import { LocalRequestCounter } from "../limits/rate-limiter.ts";
import { LocalEvents, topics } from "./store-events.ts";
import { MIGRATIONS, SCHEMA, SCHEMA_VERSION, type JobRow } from "./sqlite-schema.ts";
import type {
  Admission, ApiKeyRecord, JobResult, RequestLimit, NewJob, RetryOutcome, ScalingStats, Store, UsageRow, StoreOptions, StoredJob, StreamRead, SweepReport, WebhookDelivery,
  WorkerReport,
} from "./store.ts";

interface KeyRow {
  id: string;
  name: string;
  hash: string;
  created_at: number;
  revoked_at: number | null;
  scope: string;
  endpoints: string | null;
}

const toKey = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  name: r.name,
  hash: r.hash,
  createdAt: r.created_at,
  revokedAt: opt(r.revoked_at),
  scope: r.scope as ApiKeyRecord["scope"],
  endpoints: r.endpoints === null ? undefined : JSON.parse(r.endpoints),
});

const json = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
const parse = (s: string | null): unknown => (s === null ? undefined : JSON.parse(s));
const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

function toJob(r: JobRow): StoredJob {
  return {
    id: r.id,
    endpointId: r.endpoint,
    status: r.status as JobStatus,
    input: JSON.parse(r.input),
    webhook: opt(r.webhook),
    policy: JSON.parse(r.policy),
    s3Config: parse(r.s3_config) as StoredJob["s3Config"],
    sync: r.sync === 1,
    keyId: opt(r.key_id),
    createdAt: r.created_at,
    queuedAt: r.queued_at,
    startedAt: opt(r.started_at),
    completedAt: opt(r.completed_at),
    expiresAt: r.expires_at,
    deadline: opt(r.deadline),
    workerId: opt(r.worker_id),
    output: parse(r.output),
    error: parse(r.error),
    progress: parse(r.progress),
    losses: r.losses,
    retries: r.retries,
  };
}

/**
 * The embedded store: bun:sqlite in WAL mode under the data directory. A transaction commits
 * before a call returns, so a server killed with SIGKILL loses nothing it answered for.
 */
export class SqliteStore implements Store {
  readonly events = new LocalEvents();
  readonly #requests = new LocalRequestCounter();
  readonly #db: Database;
  readonly #retention: StoreOptions["retention"];
  #seq: number;

  constructor(path: string, options: StoreOptions) {
    this.#db = new Database(path, { create: true, strict: true });
    this.#db.run("PRAGMA journal_mode = WAL");
    this.#db.run("PRAGMA synchronous = NORMAL");
    this.#db.run("PRAGMA busy_timeout = 5000");
    this.#db.transaction(() => {
      const from = (this.#db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
      if (from > SCHEMA_VERSION) throw new Error(`${path} was written by a newer Spool (schema ${from} > ${SCHEMA_VERSION})`);
      this.#db.run(SCHEMA);
      for (let v = Math.max(from, 1) + 1; v <= SCHEMA_VERSION; v++) if (MIGRATIONS[v]) this.#db.run(MIGRATIONS[v]!);
      this.#db.run(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    })();
    this.#retention = options.retention;
    this.#seq = (this.#db.query("SELECT MAX(seq) AS m FROM jobs").get() as { m: number | null }).m ?? 0;
  }

  /** Opens (creating if needed) the store file `spool.db` in `dir`. */
  static open(dir: string, options: StoreOptions): SqliteStore {
    if (dir !== ":memory:") mkdirSync(dir, { recursive: true });
    return new SqliteStore(dir === ":memory:" ? dir : join(dir, "spool.db"), options);
  }

  #retentionOf(row: { sync: number }): number {
    return row.sync === 1 ? this.#retention.syncMs : this.#retention.asyncMs;
  }

  /** Runs `fn` in one transaction, then announces the topics it collected. */
  #tx<T>(fn: (announce: (topic: string) => void) => T): T {
    const pending = new Set<string>();
    const result = this.#db.transaction(() => fn((t) => pending.add(t)))();
    for (const t of pending) this.events.emit(t);
    return result;
  }

  #row(endpointId: string, jobId: string, now: number): JobRow | null {
    return this.#db
      .query<JobRow, [string, string, number]>("SELECT * FROM jobs WHERE id = ? AND endpoint = ? AND expires_at > ?")
      .get(jobId, endpointId, now);
  }

  #byId(jobId: string): JobRow {
    return this.#db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?").get(jobId)!;
  }

  #stop(workerId: string | null, jobId: string, announce: (t: string) => void): void {
    if (!workerId) return;
    this.#db.query("INSERT OR IGNORE INTO stops (worker_id, job_id) VALUES (?, ?)").run(workerId, jobId);
    announce(topics.stop(workerId));
  }

  /** Records the webhook call owed for a job that just reached a final state. */
  #owe(jobId: string, now: number, announce: (t: string) => void): StoredJob {
    const job = toJob(this.#byId(jobId));
    if (job.webhook) {
      this.#db
        .query("INSERT INTO webhook_deliveries (id, job_id, url, job, attempts, next_at) VALUES (?, ?, ?, ?, 0, ?)")
        .run(crypto.randomUUID(), jobId, job.webhook, JSON.stringify(job), now);
      announce(topics.webhooks);
    }
    return job;
  }

  async enqueue(job: NewJob, now: number): Promise<StoredJob> {
    return this.#tx((announce) => {
      const row = this.#db
        .query<JobRow, Record<string, string | number | null>>(
          `INSERT INTO jobs (id, endpoint, status, seq, input, webhook, policy, s3_config, sync, key_id,
             created_at, queued_at, expires_at)
           VALUES ($id, $endpoint, 'IN_QUEUE', $seq, $input, $webhook, $policy, $s3, $sync, $key, $now, $now, $expires)
           RETURNING *`,
        )
        .get({
          id: job.id,
          endpoint: job.endpointId,
          seq: ++this.#seq,
          input: JSON.stringify(job.input),
          webhook: job.webhook ?? null,
          policy: JSON.stringify(job.policy),
          s3: json(job.s3Config),
          sync: job.sync ? 1 : 0,
          key: job.keyId ?? null,
          now,
          expires: now + job.policy.ttl,
        })!;
      announce(topics.queue(job.endpointId));
      announce(topics.job(job.id));
      return toJob(row);
    });
  }

  async get(endpointId: string, jobId: string, now: number): Promise<StoredJob | null> {
    const row = this.#row(endpointId, jobId, now);
    return row && toJob(row);
  }

  async setExpiry(endpointId: string, jobId: string, expiresAt: number, now: number): Promise<StoredJob | null> {
    const row = this.#db
      .query<JobRow, [number, string, string, number]>(
        "UPDATE jobs SET expires_at = ? WHERE id = ? AND endpoint = ? AND expires_at > ? RETURNING *",
      )
      .get(expiresAt, jobId, endpointId, now);
    return row && toJob(row);
  }

  async claim(endpointId: string, workerId: string, max: number, now: number): Promise<StoredJob[]> {
    return this.#tx((announce) => {
      const rows = this.#db
        .query<JobRow, [number, string, number, string, number, number]>(
          `UPDATE jobs SET status = 'IN_PROGRESS', started_at = ?, worker_id = ?,
             deadline = ? + json_extract(policy, '$.executionTimeout')
           WHERE id IN (SELECT id FROM jobs WHERE endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ?
                        ORDER BY seq LIMIT ?)
           RETURNING *`,
        )
        .all(now, workerId, now, endpointId, now, max);
      rows.sort((a, b) => a.seq - b.seq);
      if (rows.length) this.#db.query("UPDATE workers SET last_active = ? WHERE id = ?").run(now, workerId);
      for (const r of rows) announce(topics.job(r.id));
      return rows.map(toJob);
    });
  }

  async progress(workerId: string, jobId: string, value: unknown, now: number): Promise<boolean> {
    return this.#tx((announce) => {
      const changed = this.#db
        .query(
          `UPDATE jobs SET progress = ? WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' AND expires_at > ?`,
        )
        .run(json(value ?? null), jobId, workerId, now).changes;
      if (changed) announce(topics.job(jobId));
      return changed > 0;
    });
  }

  #appendChunks(jobId: string, from: number, chunks: unknown[]): void {
    const insert = this.#db.query("INSERT INTO stream_chunks (job_id, seq, data) VALUES (?, ?, ?)");
    chunks.forEach((c, i) => insert.run(jobId, from + i, JSON.stringify(c ?? null)));
    this.#db.query("UPDATE jobs SET chunk_count = chunk_count + ? WHERE id = ?").run(chunks.length, jobId);
  }

  async appendChunks(workerId: string, jobId: string, chunks: unknown[], now: number): Promise<boolean> {
    return this.#tx((announce) => {
      const row = this.#db
        .query<Pick<JobRow, "chunk_count">, [string, string, number]>(
          "SELECT chunk_count FROM jobs WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' AND expires_at > ?",
        )
        .get(jobId, workerId, now);
      if (!row) return false;
      this.#appendChunks(jobId, row.chunk_count, chunks);
      announce(topics.job(jobId));
      return true;
    });
  }

  async readStream(endpointId: string, jobId: string, now: number): Promise<StreamRead | null> {
    return this.#tx(() => {
      const row = this.#row(endpointId, jobId, now);
      if (!row) return null;
      const chunks = this.#db
        .query<{ data: string }, [string, number]>("SELECT data FROM stream_chunks WHERE job_id = ? AND seq >= ? ORDER BY seq")
        .all(jobId, row.chunks_read)
        .map((c) => JSON.parse(c.data));
      if (chunks.length) this.#db.query("UPDATE jobs SET chunks_read = chunk_count WHERE id = ?").run(jobId);
      return { job: toJob(row), chunks };
    });
  }

  async finish(
    workerId: string,
    jobId: string,
    result: JobResult,
    finalChunks: unknown[],
    now: number,
    cost?: number,
  ): Promise<StoredJob | null> {
    return this.#tx((announce) => {
      const row = this.#db
        .query<JobRow, [string, string]>("SELECT * FROM jobs WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS'")
        .get(jobId, workerId);
      if (!row || row.expires_at <= now) return null;
      const failed = "error" in result;
      this.#db
        .query(
          `UPDATE jobs SET status = ?, output = ?, error = ?, progress = NULL, completed_at = ?, deadline = NULL,
             expires_at = ? WHERE id = ?`,
        )
        .run(
          failed ? "FAILED" : "COMPLETED",
          failed ? null : json(result.output),
          failed ? json(result.error) : null,
          now,
          now + this.#retentionOf(row),
          jobId,
        );
      if (row.chunk_count === 0 && finalChunks.length) this.#appendChunks(jobId, 0, finalChunks);
      this.#db.query("UPDATE workers SET last_active = ? WHERE id = ?").run(now, workerId);
      this.#db.query("DELETE FROM stops WHERE job_id = ?").run(jobId);
      if (!failed && cost !== undefined && row.key_id) {
        this.#db
          .query(
            `INSERT INTO usage (key_id, endpoint, jobs, cost_e10) VALUES (?1, ?2, 1, ?3)
             ON CONFLICT (key_id, endpoint) DO UPDATE SET jobs = jobs + 1, cost_e10 = cost_e10 + ?3`,
          )
          .run(row.key_id, row.endpoint, Math.round(cost * 1e10));
      }
      announce(topics.job(jobId));
      return this.#owe(jobId, now, announce);
    });
  }

  async cancel(endpointId: string, jobId: string, now: number): Promise<StoredJob | null> {
    return this.#tx((announce) => {
      const row = this.#row(endpointId, jobId, now);
      if (!row) return null;
      if (row.status !== "IN_QUEUE" && row.status !== "IN_PROGRESS") return toJob(row);
      this.#db
        .query(
          `UPDATE jobs SET status = 'CANCELLED', completed_at = ?, deadline = NULL, progress = NULL, expires_at = ?
           WHERE id = ?`,
        )
        .run(now, now + this.#retentionOf(row), jobId);
      if (row.status === "IN_PROGRESS") this.#stop(row.worker_id, jobId, announce);
      announce(topics.job(jobId));
      return this.#owe(jobId, now, announce);
    });
  }

  async retry(endpointId: string, jobId: string, now: number): Promise<RetryOutcome> {
    return this.#tx((announce) => {
      const row = this.#row(endpointId, jobId, now);
      if (!row) return { kind: "not-found" } as const;
      if (row.status !== "FAILED" && row.status !== "TIMED_OUT") return { kind: "conflict", status: row.status as JobStatus } as const;
      const ttl = (JSON.parse(row.policy) as StoredJob["policy"]).ttl;
      this.#db.query("DELETE FROM stream_chunks WHERE job_id = ?").run(jobId);
      // A stop owed to the earlier run (its timeout) must not cancel the new one.
      this.#db.query("DELETE FROM stops WHERE job_id = ?").run(jobId);
      this.#db
        .query(
          `UPDATE jobs SET status = 'IN_QUEUE', seq = ?, queued_at = ?, expires_at = ?, started_at = NULL,
             completed_at = NULL, deadline = NULL, worker_id = NULL, output = NULL, error = NULL, progress = NULL,
             losses = 0, retries = retries + 1, chunk_count = 0, chunks_read = 0
           WHERE id = ?`,
        )
        .run(++this.#seq, now, now + ttl, jobId);
      this.#db
        .query(
          `INSERT INTO counters (endpoint, name, value) VALUES (?, 'retried', 1)
           ON CONFLICT (endpoint, name) DO UPDATE SET value = value + 1`,
        )
        .run(endpointId);
      announce(topics.queue(endpointId));
      announce(topics.job(jobId));
      return { kind: "retried", job: toJob(this.#byId(jobId)) } as const;
    });
  }

  async purgeQueue(endpointId: string, now: number): Promise<number> {
    return this.#tx((announce) => {
      const ids = this.#db
        .query<{ id: string }, [string, number]>(
          "DELETE FROM jobs WHERE endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ? RETURNING id",
        )
        .all(endpointId, now);
      for (const { id } of ids) announce(topics.job(id));
      return ids.length;
    });
  }

  async health(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<HealthResponse> {
    const counts = this.#db
      .query<{ status: string; n: number }, [string, number]>(
        "SELECT status, COUNT(*) AS n FROM jobs WHERE endpoint = ? AND expires_at > ? GROUP BY status",
      )
      .all(endpointId, now);
    const n = (s: string) => counts.find((c) => c.status === s)?.n ?? 0;
    const retried =
      this.#db
        .query<{ value: number }, [string]>("SELECT value FROM counters WHERE endpoint = ? AND name = 'retried'")
        .get(endpointId)?.value ?? 0;
    const workers = this.#db
      .query<{ busy: number; unhealthy: string | null }, [number, string, number]>(
        `SELECT EXISTS (SELECT 1 FROM jobs j WHERE j.worker_id = w.id AND j.status = 'IN_PROGRESS' AND j.expires_at > ?) AS busy,
           w.unhealthy FROM workers w WHERE w.endpoint = ? AND w.last_seen > ?`,
      )
      .all(now, endpointId, now - workerLossTimeoutMs);
    const running = workers.filter((w) => w.busy).length;
    const unhealthy = workers.filter((w) => !w.busy && w.unhealthy !== null).length;
    return {
      jobs: {
        completed: n("COMPLETED"),
        failed: n("FAILED") + n("TIMED_OUT"),
        inProgress: n("IN_PROGRESS"),
        inQueue: n("IN_QUEUE"),
        retried,
      },
      workers: { idle: workers.length - running - unhealthy, running, initializing: 0, unhealthy },
    };
  }

  async recent(endpointId: string, now: number, limit: number, before?: string): Promise<{ jobs: StoredJob[]; next?: string }> {
    const cursor = before === undefined ? Number.MAX_SAFE_INTEGER : Number(before);
    const rows = this.#db
      .query<JobRow & { rid: number }, [string, number, number, number]>(
        "SELECT rowid AS rid, * FROM jobs WHERE endpoint = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?",
      )
      .all(endpointId, now, cursor, limit + 1);
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? String(page[page.length - 1]!.rid) : undefined;
    return { jobs: page.map(toJob), next };
  }

  async touchWorker(workerId: string, endpointId: string, now: number, report?: WorkerReport): Promise<void> {
    this.#db
      .query(
        `INSERT INTO workers (id, endpoint, last_seen, running_ids, unhealthy) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET endpoint = ?2, last_seen = ?3,
           running_ids = COALESCE(?4, running_ids), unhealthy = CASE WHEN ?6 THEN ?5 ELSE unhealthy END`,
      )
      .run(
        workerId,
        endpointId,
        now,
        report?.runningIds ? JSON.stringify(report.runningIds) : null,
        report?.unhealthy ? JSON.stringify(report.unhealthy) : null,
        report?.unhealthy !== undefined ? 1 : 0,
      );
  }

  async usage(): Promise<UsageRow[]> {
    return this.#db
      .query<{ key_id: string; endpoint: string; jobs: number; cost_e10: number }, []>(
        "SELECT * FROM usage ORDER BY key_id, endpoint",
      )
      .all()
      .map((r) => ({ keyId: r.key_id, endpointId: r.endpoint, jobs: r.jobs, cost: r.cost_e10 / 1e10 }));
  }

  async scalingStats(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<ScalingStats> {
    const q = this.#db
      .query<{ low: number; n: number; oldest: number | null }, [string, number]>(
        `SELECT COALESCE(json_extract(policy, '$.lowPriority'), 0) AS low, COUNT(*) AS n, MIN(queued_at) AS oldest
         FROM jobs WHERE endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ? GROUP BY low`,
      )
      .all(endpointId, now);
    const normal = q.find((r) => !r.low);
    const inProgress = this.#db
      .query<{ n: number }, [string, number]>("SELECT COUNT(*) AS n FROM jobs WHERE endpoint = ? AND status = 'IN_PROGRESS' AND expires_at > ?")
      .get(endpointId, now)!.n;
    const workers = this.#db
      .query<{ id: string; running: number; unhealthy: string | null; last_active: number | null }, [number, string, number]>(
        `SELECT w.id, (SELECT COUNT(*) FROM jobs j WHERE j.worker_id = w.id AND j.status = 'IN_PROGRESS' AND j.expires_at > ?) AS running,
           w.unhealthy, w.last_active FROM workers w WHERE w.endpoint = ? AND w.last_seen > ?`,
      )
      .all(now, endpointId, now - workerLossTimeoutMs);
    return {
      queued: normal?.n ?? 0,
      queuedLowPriority: q.find((r) => r.low)?.n ?? 0,
      inProgress,
      oldestQueuedAt: normal?.oldest ?? undefined,
      workers: workers.map((w) => ({ id: w.id, running: w.running, unhealthy: w.unhealthy !== null, lastActive: opt(w.last_active) })),
    };
  }

  async forgetWorker(workerId: string): Promise<void> {
    this.#tx(() => {
      this.#db.query("DELETE FROM workers WHERE id = ?").run(workerId);
      this.#db.query("DELETE FROM stops WHERE worker_id = ?").run(workerId);
    });
  }

  async queueDepth(endpointId: string, now: number): Promise<number> {
    return this.#db
      .query<{ n: number }, [string, number]>("SELECT COUNT(*) AS n FROM jobs WHERE endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ?")
      .get(endpointId, now)!.n;
  }

  async takeDueDeliveries(now: number, leaseMs: number, limit: number): Promise<WebhookDelivery[]> {
    return this.#tx(() =>
      this.#db
        .query<{ id: string; url: string; job: string; attempts: number }, [number, number, number]>(
          `UPDATE webhook_deliveries SET next_at = ?
           WHERE id IN (SELECT id FROM webhook_deliveries WHERE next_at <= ? ORDER BY next_at LIMIT ?)
           RETURNING id, url, job, attempts`,
        )
        .all(now + leaseMs, now, limit)
        .map((r) => ({ id: r.id, url: r.url, job: JSON.parse(r.job) as StoredJob, attempts: r.attempts })),
    );
  }

  async deliveryDone(id: string): Promise<void> {
    this.#db.query("DELETE FROM webhook_deliveries WHERE id = ?").run(id);
  }

  async deliveryRetry(id: string, nextAt: number): Promise<void> {
    this.#db.query("UPDATE webhook_deliveries SET attempts = attempts + 1, next_at = ? WHERE id = ?").run(nextAt, id);
  }

  async takeStops(workerId: string): Promise<string[]> {
    return this.#db
      .query<{ job_id: string }, [string]>("DELETE FROM stops WHERE worker_id = ? RETURNING job_id")
      .all(workerId)
      .map((r) => r.job_id);
  }

  async sweep(now: number, workerLossTimeoutMs: number): Promise<SweepReport> {
    return this.#tx((announce) => {
      const report: SweepReport = { expired: 0, timedOut: [], requeued: [], lost: [] };

      const expired = this.#db
        .query<Pick<JobRow, "id" | "status" | "worker_id">, [number]>(
          "DELETE FROM jobs WHERE expires_at <= ? RETURNING id, status, worker_id",
        )
        .all(now);
      for (const j of expired) {
        this.#db.query("DELETE FROM stream_chunks WHERE job_id = ?").run(j.id);
        if (j.status === "IN_PROGRESS") this.#stop(j.worker_id, j.id, announce);
        announce(topics.job(j.id));
      }
      report.expired = expired.length;

      const late = this.#db
        .query<JobRow, [number]>("SELECT * FROM jobs WHERE status = 'IN_PROGRESS' AND deadline <= ?")
        .all(now);
      for (const j of late) {
        const timeout = (JSON.parse(j.policy) as StoredJob["policy"]).executionTimeout;
        this.#db
          .query(
            `UPDATE jobs SET status = 'TIMED_OUT', completed_at = ?, deadline = NULL, progress = NULL, error = ?,
               expires_at = ? WHERE id = ?`,
          )
          .run(now, JSON.stringify(`execution timeout of ${timeout} ms exceeded`), now + this.#retentionOf(j), j.id);
        this.#stop(j.worker_id, j.id, announce);
        announce(topics.job(j.id));
        this.#owe(j.id, now, announce);
        report.timedOut.push({ jobId: j.id, workerId: opt(j.worker_id) });
      }

      const cutoff = now - workerLossTimeoutMs;
      const orphans = this.#db
        .query<JobRow, [number]>(
          `SELECT j.* FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id
           WHERE j.status = 'IN_PROGRESS' AND (w.id IS NULL OR w.last_seen <= ?)`,
        )
        .all(cutoff);
      for (const j of orphans) {
        if (j.losses === 0) {
          this.#db
            .query(
              `UPDATE jobs SET status = 'IN_QUEUE', losses = 1, worker_id = NULL, started_at = NULL, deadline = NULL,
                 progress = NULL WHERE id = ?`,
            )
            .run(j.id);
          announce(topics.queue(j.endpoint));
          report.requeued.push(j.id);
        } else {
          this.#db
            .query(
              `UPDATE jobs SET status = 'FAILED', completed_at = ?, deadline = NULL, progress = NULL, error = ?,
                 expires_at = ? WHERE id = ?`,
            )
            .run(
              now,
              JSON.stringify(`worker ${j.worker_id} was lost while running the job (it stopped sending heartbeats), twice`),
              now + this.#retentionOf(j),
              j.id,
            );
          this.#owe(j.id, now, announce);
          report.lost.push(j.id);
        }
        announce(topics.job(j.id));
      }
      const dead = this.#db.query<{ id: string }, [number]>("DELETE FROM workers WHERE last_seen <= ? RETURNING id").all(cutoff);
      for (const w of dead) this.#db.query("DELETE FROM stops WHERE worker_id = ?").run(w.id);
      return report;
    });
  }

  async admitRequest(bucket: string, limit: RequestLimit, windowMs: number, now: number): Promise<Admission> {
    return this.#requests.admit(bucket, limit, windowMs, now);
  }

  /** One server owns an embedded store: it always holds every lease. */
  async tryLease(): Promise<boolean> {
    return true;
  }

  async addKey(key: ApiKeyRecord): Promise<void> {
    this.#db
      .query("INSERT INTO api_keys (id, name, hash, created_at, revoked_at, scope, endpoints) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run(key.id, key.name, key.hash, key.createdAt, key.revokedAt ?? null, key.scope, key.endpoints ? JSON.stringify(key.endpoints) : null);
  }

  async findKey(hash: string): Promise<ApiKeyRecord | null> {
    const r = this.#db.query<KeyRow, [string]>("SELECT * FROM api_keys WHERE hash = ?").get(hash);
    return r && toKey(r);
  }

  async listKeys(): Promise<ApiKeyRecord[]> {
    return this.#db.query<KeyRow, []>("SELECT * FROM api_keys ORDER BY created_at, rowid").all().map(toKey);
  }

  async revokeKey(idOrName: string, now: number): Promise<boolean> {
    return this.#tx((announce) => {
      const changed = this.#db
        .query("UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR name = ?) AND revoked_at IS NULL")
        .run(now, idOrName, idOrName).changes;
      if (changed) announce(topics.keys);
      return changed > 0;
    });
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}
