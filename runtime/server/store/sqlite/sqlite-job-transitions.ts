import type { JobStatus } from "../../../protocol/limits.ts";
import { topics } from "../store-events.ts";
import type { CancelOutcome, NewJob, RetryOutcome, StoredJob, StreamRead } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";
import { json } from "./sqlite-job-row.ts";
import type { QueuedEntry } from "./seq-queue.ts";
import type { JobRow, RowidRow } from "./sqlite-schema.ts";
import { appendChunkRows, chunksOf } from "./sqlite-chunks.ts";
import { finishJob } from "./sqlite-finish.ts";

/**
 * Until this many queued jobs (on all endpoints) keep theirs, a submission's job stays in memory
 * until it is claimed, which then skips reading its row back: a deep backlog keeps at most this many (inputs of at most INPUT_APART_CHARS), its
 * later jobs are read back as before.
 */
const KEEP_WRITTEN_AT_MOST = 10_000;

/**
 * The changes a job goes through, from enqueue to a final state, as SQL on the embedded store.
 * Those that take `announce` run inside the store's transaction.
 */
export const jobTransitions = {
  /**
   * Inserts a new job, queued; or with `takenBy`, as taken by that worker (handed to its waiting
   * job-take: never queued).
   */
  enqueue(s: SqliteContext, job: NewJob, now: number, announce: Announce, takenBy?: string): StoredJob {
    const seq = s.nextSeq();
    const expiresAt = s.expiring(now + job.policy.ttl);
    const deadline = takenBy === undefined ? null : now + job.policy.executionTimeout;
    const input = s.storeInput(job.id, job.input);
    const { lastInsertRowid } = s.db
      .query<JobRow, Record<string, string | number | null>>(
        `INSERT INTO jobs (id, endpoint, status, seq, input, webhook, policy, s3_config, sync, key_id, origin, traceparent,
           created_at, queued_at, started_at, expires_at, deadline, worker_id)
         VALUES ($id, $endpoint, $status, $seq, $input, $webhook, $policy, $s3, $sync, $key, $origin, $traceparent, $now, $now, $started, $expires, $deadline, $worker)`,
      )
      .run({
        id: job.id,
        endpoint: job.endpointId,
        status: takenBy === undefined ? "IN_QUEUE" : "IN_PROGRESS",
        seq,
        input,
        webhook: job.webhook ?? null,
        policy: JSON.stringify(job.policy),
        s3: json(job.s3Config),
        sync: job.sync ? 1 : 0,
        key: job.keyId ?? null,
        origin: job.origin ?? null,
        traceparent: job.traceparent ?? null,
        now,
        started: deadline === null ? null : now,
        expires: expiresAt,
        deadline,
        worker: takenBy ?? null,
      });
    announce(topics.job(job.id));
    // The row as written, without reading it back.
    const written: StoredJob = {
      id: job.id,
      endpointId: job.endpointId,
      status: "IN_QUEUE",
      input: job.input,
      webhook: job.webhook,
      policy: job.policy,
      s3Config: job.s3Config,
      sync: job.sync,
      keyId: job.keyId,
      origin: job.origin,
      traceparent: job.traceparent,
      createdAt: now,
      queuedAt: now,
      expiresAt,
      losses: 0,
      retries: 0,
    };
    if (takenBy !== undefined && deadline !== null) {
      s.index.move(job.endpointId, null, "IN_PROGRESS");
      s.workerActive(takenBy, now);
      const taken: StoredJob = { ...written, status: "IN_PROGRESS", startedAt: now, deadline, workerId: takenBy };
      s.handedOut(taken, input !== "");
      return taken;
    }
    const cache = input !== "" && s.index.keeping < KEEP_WRITTEN_AT_MOST;
    s.index.queued(job.endpointId, null, {
      id: job.id,
      seq,
      expiresAt,
      queuedAt: now,
      lowPriority: job.policy.lowPriority,
      rid: Number(lastInsertRowid),
      fresh: true,
      written: cache ? written : undefined,
    });
    announce(topics.queue(job.endpointId));
    return written;
  },

  setExpiry(s: SqliteContext, endpointId: string, jobId: string, expiresAt: number, now: number): StoredJob | null {
    const row = s.db
      .query<JobRow, [number, string, string, number]>(
        "UPDATE jobs SET expires_at = ? WHERE id = ? AND endpoint = ? AND expires_at > ? RETURNING *",
      )
      .get(s.expiring(expiresAt), jobId, endpointId, now);
    if (!row) return null;
    const queued = row.status === "IN_QUEUE" ? s.index.of(endpointId).queue.get(row.seq) : undefined;
    if (queued) queued.expiresAt = expiresAt;
    return s.job(row);
  },

  claim(s: SqliteContext, endpointId: string, workerId: string, max: number, now: number, announce: Announce): StoredJob[] {
    // The queue in memory names the jobs in claim order; expired ones are left to the sweep.
    const picked: QueuedEntry[] = [];
    for (const entry of s.index.of(endpointId).queue.inOrder()) {
      if (picked.length >= max) break;
      if (entry.expiresAt > now) picked.push(entry);
    }
    if (!picked.length) return [];
    // Read, then change by id: an UPDATE ... RETURNING costs about half again as much in SQLite.
    const read = s.db.query<JobRow, [string]>("SELECT * FROM jobs WHERE id = ?");
    const take = s.db.query<never, [number, string, number | null, string]>(
      "UPDATE jobs SET status = 'IN_PROGRESS', started_at = ?1, worker_id = ?2, deadline = ?3 WHERE id = ?4 AND status = 'IN_QUEUE'",
    );
    const jobs: StoredJob[] = [];
    for (const entry of picked) {
      // The job as its submission wrote it when the entry kept it (its row unread: the change
      // itself checks that it is still queued), else its row read back.
      const row = entry.written ? undefined : read.get(entry.id);
      const job = entry.written ? { ...entry.written } : row?.status === "IN_QUEUE" ? s.job(row) : undefined;
      // (A policy without a timeout, which no Spool writes, leaves the job without a deadline as before.)
      const timeout = job?.policy.executionTimeout;
      const deadline = typeof timeout === "number" ? now + timeout : null;
      if (!job || take.run(now, workerId, deadline, entry.id).changes === 0) {
        s.index.forget(endpointId, entry.seq); // not queued after all
        continue;
      }
      s.index.unqueued(endpointId, entry.seq, "IN_PROGRESS");
      announce(topics.job(entry.id));
      const taken = Object.assign(job, {
        expiresAt: entry.expiresAt,
        status: "IN_PROGRESS",
        startedAt: now,
        workerId,
        deadline: deadline ?? undefined,
      } as const);
      jobs.push(taken);
      // Not one whose input is kept apart (read when first used): finish would read it.
      s.handedOut(taken, row?.input !== "");
    }
    if (jobs.length) s.workerActive(workerId, now);
    return jobs;
  },

  returnJobs(s: SqliteContext, workerId: string, jobIds: string[], announce: Announce): void {
    const back = s.db.query<RowidRow, [string, string]>(
      `UPDATE jobs SET status = 'IN_QUEUE', worker_id = NULL, started_at = NULL, deadline = NULL, progress = NULL
       WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' RETURNING rowid AS rid, *`,
    );
    for (const id of jobIds) {
      const row = back.get(id, workerId);
      if (row) s.requeued(row, announce);
    }
  },

  progress(s: SqliteContext, workerId: string, jobId: string, value: unknown, now: number, announce: Announce): boolean {
    const changed = s.db
      .query(`UPDATE jobs SET progress = ? WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' AND expires_at > ?`)
      .run(json(value ?? null), jobId, workerId, now).changes;
    if (changed) announce(topics.job(jobId));
    return changed > 0;
  },

  appendChunks(s: SqliteContext, workerId: string, jobId: string, chunks: unknown[], now: number, announce: Announce): boolean {
    const row = s.db
      .query<Pick<JobRow, "chunk_count">, [string, string, number]>(
        "SELECT chunk_count FROM jobs WHERE id = ? AND worker_id = ? AND status = 'IN_PROGRESS' AND expires_at > ?",
      )
      .get(jobId, workerId, now);
    if (!row) return false;
    appendChunkRows(s, jobId, row.chunk_count, chunks);
    announce(topics.job(jobId));
    return true;
  },

  readStream(s: SqliteContext, endpointId: string, jobId: string, now: number): StreamRead | null {
    const row = s.liveRow(endpointId, jobId, now);
    if (!row) return null;
    const chunks = chunksOf(s, row, row.chunks_read);
    if (chunks.length) s.db.query("UPDATE jobs SET chunks_read = chunk_count WHERE id = ?").run(jobId);
    return { job: s.job(row), chunks };
  },

  finish: finishJob,

  cancel(s: SqliteContext, endpointId: string, jobId: string, now: number, announce: Announce): CancelOutcome | null {
    const row = s.liveRow(endpointId, jobId, now);
    if (!row) return null;
    if (row.status !== "IN_QUEUE" && row.status !== "IN_PROGRESS") return { job: s.job(row), cancelled: false };
    s.db
      .query(
        `UPDATE jobs SET status = 'CANCELLED', completed_at = ?, deadline = NULL, progress = NULL, expires_at = ?
         WHERE id = ?`,
      )
      .run(now, s.expiring(now + s.retentionOf(row)), jobId);
    if (row.status === "IN_QUEUE") s.index.unqueued(endpointId, row.seq, "CANCELLED");
    else s.index.move(endpointId, "IN_PROGRESS", "CANCELLED");
    if (row.status === "IN_PROGRESS") s.stop(row.worker_id, jobId, announce);
    announce(topics.job(jobId));
    return { job: s.owe(jobId, now, announce), cancelled: true };
  },

  retry(s: SqliteContext, endpointId: string, jobId: string, now: number, announce: Announce): RetryOutcome {
    const row = s.liveRow(endpointId, jobId, now);
    if (!row) return { kind: "not-found" } as const;
    if (row.status !== "FAILED" && row.status !== "TIMED_OUT") return { kind: "conflict", status: row.status as JobStatus } as const;
    const policy = JSON.parse(row.policy) as StoredJob["policy"];
    const seq = s.nextSeq();
    s.db.query("DELETE FROM stream_chunks WHERE job_id = ?").run(jobId);
    // A stop owed to the earlier run (its timeout) must not cancel the new one.
    s.dropJobStops(jobId);
    const { rid } = s.db
      .query<{ rid: number }, [number, number, number, string]>(
        `UPDATE jobs SET status = 'IN_QUEUE', seq = ?, queued_at = ?, expires_at = ?, started_at = NULL,
           completed_at = NULL, deadline = NULL, worker_id = NULL, output = NULL, error = NULL, progress = NULL,
           losses = 0, retries = retries + 1, chunk_count = 0, chunks_read = 0, output_chunk = 0
         WHERE id = ? RETURNING rowid AS rid`,
      )
      .get(seq, now, s.expiring(now + policy.ttl), jobId)!;
    s.index.queued(endpointId, row.status as JobStatus, {
      id: jobId,
      seq,
      expiresAt: now + policy.ttl,
      queuedAt: now,
      lowPriority: policy.lowPriority,
      rid,
      fresh: false,
    });
    s.db
      .query(
        `INSERT INTO counters (endpoint, name, value) VALUES (?, 'retried', 1)
         ON CONFLICT (endpoint, name) DO UPDATE SET value = value + 1`,
      )
      .run(endpointId);
    announce(topics.queue(endpointId));
    announce(topics.job(jobId));
    return { kind: "retried", job: s.job(s.rowById(jobId)) } as const;
  },

  purgeQueue(s: SqliteContext, endpointId: string, now: number, announce: Announce): number {
    // The queue in memory names the queued jobs (no index of them on disk); expired ones are left to the sweep.
    const queued = [...s.index.of(endpointId).queue.inOrder()].filter((e) => e.expiresAt > now);
    const drop = s.db.query<never, [string, string, number]>(
      "DELETE FROM jobs WHERE id = ? AND endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ?",
    );
    let purged = 0;
    for (const { id, seq } of queued) {
      if (!drop.run(id, endpointId, now).changes) continue;
      s.index.unqueued(endpointId, seq, null);
      s.forgetJob(id);
      announce(topics.job(id));
      purged++;
    }
    return purged;
  },
};
