import { outputPieces, splitChunk } from "../../../protocol/stream-chunks.ts";
import { RedisClient } from "bun";
import type { JobStatus } from "../../../protocol/limits.ts";
import type { HealthResponse } from "../../../protocol/job-response.ts";
import type {
  CancelOutcome,
  LogRead,
  Admission,
  ApiKeyRecord,
  EndedJob,
  EnqueuedJob,
  IdempotencyRecord,
  JobResult,
  NewJob,
  RequestLimit,
  RetryOutcome,
  ScalingStats,
  StartFailure,
  StartFailureRun,
  Store,
  StoreOptions,
  StoredJob,
  StreamRead,
  SweepReport,
  UsageRow,
  WebhookDelivery,
  WorkerReport,
  WorkerTouch,
} from "../store.ts";
import { ReservedAdmission } from "./redis-admission.ts";
import { REPLY_TIMEOUT_MS, watchReplies, type ReplyWatch } from "./redis-watchdog.ts";
import { keepSubscribed, RedisEvents } from "./redis-events.ts";
import { redisReservations } from "./redis-reservations.ts";
import { costE10, endedFromReply, fromReply, replyFields, toEndedJob, toJob, type JobReply } from "./redis-job-codec.ts";
import { RedisScripts } from "./redis-scripts.ts";
import { runsFromHash } from "./redis-start-failures.ts";
import { enqueued, idempotencyRecord, idempotencyScope, jobFields } from "./redis-enqueue.ts";
import { ScriptBatch } from "./redis-script-batch.ts";
import { cutLine, logLineBytes, type JobLogLine } from "../../../protocol/job-log.ts";

const SWEEP_BATCH = 500;

/**
 * A stream read's reply ({job, chunk JSON...}) as a StreamRead. A job whose output is its
 * stream (ochunk) comes with no chunks: its pieces from `from(hash)` on are cut from the output.
 */
function streamRead([job, ...chunks]: [JobReply, ...string[]], from: (h: Record<string, string>) => number): StreamRead {
  const h = replyFields(job);
  const read = toJob(h);
  if (h.ochunk !== "1") return { job: read, chunks: chunks.map((c) => JSON.parse(c)) };
  // Nothing left to read: the output (parsed when first used) is not touched.
  const count = Number(h.chunks);
  const start = from(h);
  return { job: read, chunks: start >= count ? [] : outputPieces(read.output, count, start) };
}

/**
 * The store on Redis, for several servers: every change is one Lua script (atomic), all keys
 * share one hash tag so scripts stay in one slot of a Redis Cluster, and state changes are
 * announced on one pub/sub channel. Durable as the Redis server is (use AOF).
 */
export class RedisStore implements Store {
  readonly handsOff = true;
  readonly events: RedisEvents;
  readonly #client: RedisClient;
  readonly #subscriber: RedisClient;
  readonly #prefix: string;
  readonly #admission: ReservedAdmission;
  readonly #scripts: RedisScripts;
  readonly #enqueues: ScriptBatch;
  readonly #finishes: ScriptBatch;
  readonly #claims: ScriptBatch;
  readonly #watch: ReplyWatch;
  #closing = false;

  private constructor(client: RedisClient, subscriber: RedisClient, prefix: string, options: StoreOptions, watch: ReplyWatch) {
    this.#watch = watch;
    this.#client = client;
    this.#subscriber = subscriber;
    this.#prefix = prefix;
    this.#scripts = new RedisScripts(client, [prefix, options.retention.syncMs, options.retention.asyncMs]);
    this.#enqueues = new ScriptBatch(this.#scripts, "enqueue");
    this.#finishes = new ScriptBatch(this.#scripts, "finish");
    this.#claims = new ScriptBatch(this.#scripts, "claim");
    this.events = new RedisEvents(client, `${prefix}events`, `${prefix}listen`);
    this.#admission = new ReservedAdmission(redisReservations(client, this.#scripts, prefix));
  }

  /**
   * Connects, loads the scripts and subscribes to the events channel. `prefix` namespaces keys;
   * a call Redis leaves unanswered for `replyTimeoutMs` fails (see watchReplies).
   */
  static async connect(url: string, options: StoreOptions, prefix = "{spool}:", replyTimeoutMs = REPLY_TIMEOUT_MS): Promise<RedisStore> {
    const client = new RedisClient(url, { connectionTimeout: replyTimeoutMs });
    await client.connect();
    const subscriber = await client.duplicate();
    const watch = watchReplies(client, { timeoutMs: replyTimeoutMs });
    const store = new RedisStore(client, subscriber, prefix, options, watch);
    await store.#scripts.loadAll();
    await keepSubscribed(subscriber, `${prefix}events`, store.events, () => store.#closing);
    return store;
  }

  async #hash(key: string): Promise<Record<string, string>> {
    return (await this.#client.send("HGETALL", [`${this.#prefix}${key}`])) as Record<string, string>;
  }

  async enqueue(job: NewJob, now: number, maxQueued?: number, handTo?: string): Promise<EnqueuedJob> {
    const reply = await this.#enqueues.run(now, [
      jobFields(job),
      JSON.stringify(job.input),
      maxQueued === undefined ? "" : String(maxQueued),
      handTo ?? "",
    ]);
    return enqueued(job, now, handTo, reply);
  }

  async findByIdempotencyKey(keyId: string | undefined, endpointId: string, key: string, now: number): Promise<IdempotencyRecord | null> {
    return idempotencyRecord(await this.#scripts.run("idemFind", [now, idempotencyScope(keyId, endpointId, key), endpointId]));
  }

  async get(endpointId: string, jobId: string, now: number): Promise<StoredJob | null> {
    const h = await this.#hash(`job:${jobId}`);
    return h.id && h.ep === endpointId && Number(h.expires) > now ? toJob(h) : null;
  }

  async setExpiry(endpointId: string, jobId: string, expiresAt: number, now: number): Promise<StoredJob | null> {
    const r = (await this.#scripts.run("setExpiry", [now, endpointId, jobId, expiresAt])) as JobReply | null;
    return r ? fromReply(r) : null;
  }

  async claim(endpointId: string, workerId: string, max: number, now: number): Promise<StoredJob[]> {
    const rows = (await this.#claims.run(now, [endpointId, workerId, String(max)])) as JobReply[];
    return rows.map(fromReply);
  }

  async returnJobs(workerId: string, jobIds: string[], now: number): Promise<void> {
    if (jobIds.length) await this.#scripts.run("returnJobs", [now, workerId, ...jobIds]);
  }

  async progress(workerId: string, jobId: string, value: unknown, now: number): Promise<boolean> {
    return (await this.#scripts.run("progress", [now, workerId, jobId, JSON.stringify(value ?? null)])) === 1;
  }

  async appendChunks(workerId: string, jobId: string, chunks: unknown[], now: number): Promise<boolean> {
    const texts = JSON.stringify(chunks.map((c) => JSON.stringify(c ?? null)));
    return (await this.#scripts.run("append", [now, workerId, jobId, texts])) === 1;
  }

  async readStream(endpointId: string, jobId: string, now: number): Promise<StreamRead | null> {
    const r = (await this.#scripts.run("readStream", [now, endpointId, jobId])) as [JobReply, ...string[]] | null;
    return r && streamRead(r, (h) => Number(h.read));
  }

  async readChunks(endpointId: string, jobId: string, from: number, now: number): Promise<StreamRead | null> {
    const r = (await this.#scripts.run("readChunks", [now, endpointId, jobId, from])) as [JobReply, ...string[]] | null;
    return r && streamRead(r, () => from);
  }

  async appendLogs(
    workerId: string,
    jobId: string,
    lines: JobLogLine[],
    maxBytes: number,
    now: number,
  ): Promise<{ truncated: boolean } | null> {
    const pairs = lines.flatMap((l) => [logLineBytes(l), JSON.stringify(l)]);
    const r = Number(
      await this.#scripts.run("appendLogs", [now, workerId, jobId, maxBytes, JSON.stringify(cutLine(now, maxBytes)), ...pairs]),
    );
    return r < 0 ? null : { truncated: r === 1 };
  }

  async readLogs(endpointId: string, jobId: string, from: number, now: number): Promise<LogRead | null> {
    const r = (await this.#scripts.run("readLogs", [now, endpointId, jobId, from])) as string[] | null;
    if (!r) return null;
    const [cut, ...lines] = r;
    return { lines: lines.map((l) => JSON.parse(l) as JobLogLine), truncated: cut === "1" };
  }

  async finish(
    workerId: string,
    jobId: string,
    result: JobResult,
    streamOutput: boolean,
    now: number,
    cost?: number,
  ): Promise<EndedJob | null> {
    const failed = "error" in result;
    const payload = failed ? result.error : result.output;
    const text = payload === undefined ? "" : JSON.stringify(payload);
    // The output is the stream of a job that streamed nothing: how many pieces, cut again when read.
    const pieces = streamOutput && !failed && payload !== undefined ? splitChunk(payload, undefined, text).length : 0;
    const r = (await this.#finishes.run(now, [
      workerId,
      jobId,
      failed ? "error" : "output",
      text,
      String(pieces),
      costE10(cost),
    ])) as JobReply | null;
    if (!r) return null;
    // The answer leaves out the input, and the output, which is the text sent (a result's), as stored.
    const h = replyFields(r);
    if (!failed && text !== "") h.output = text;
    return toEndedJob(h);
  }

  async cancel(endpointId: string, jobId: string, now: number): Promise<CancelOutcome | null> {
    const r = (await this.#scripts.run("cancel", [now, endpointId, jobId])) as [number, JobReply] | null;
    return r ? { job: fromReply(r[1]), cancelled: r[0] === 1 } : null;
  }

  async retry(endpointId: string, jobId: string, now: number): Promise<RetryOutcome> {
    const r = (await this.#scripts.run("retry", [now, endpointId, jobId])) as string | JobReply;
    if (r === "not-found") return { kind: "not-found" };
    if (typeof r === "string") return { kind: "conflict", status: r.slice("conflict:".length) as JobStatus };
    return { kind: "retried", job: fromReply(r) };
  }

  /** How many queued jobs of the endpoint are taken before this one; null unless it is queued. O(log n). */
  async queuePosition(endpointId: string, jobId: string, now: number): Promise<number | null> {
    const r = Number(await this.#scripts.run("position", [now, endpointId, jobId]));
    return r < 0 ? null : r;
  }

  async purgeQueue(endpointId: string, now: number): Promise<number> {
    return Number(await this.#scripts.run("purge", [now, endpointId]));
  }

  async failQueued(endpointId: string, error: unknown, now: number, limit: number): Promise<EndedJob[]> {
    const rows = (await this.#scripts.run("failQueued", [now, endpointId, JSON.stringify(error), limit])) as JobReply[];
    return rows.map(endedFromReply);
  }

  async health(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<HealthResponse> {
    const [completed, failed, inProgress, inQueue, retried, idle, running, unhealthy] = (await this.#scripts.run("health", [
      now,
      endpointId,
      workerLossTimeoutMs,
    ])) as number[];
    return {
      jobs: { completed: completed!, failed: failed!, inProgress: inProgress!, inQueue: inQueue!, retried: retried! },
      workers: { idle: idle!, running: running!, initializing: 0, unhealthy: unhealthy! },
    };
  }

  async recent(
    endpointId: string,
    now: number,
    limit: number,
    before?: string,
    status?: JobStatus,
  ): Promise<{ jobs: StoredJob[]; next?: string }> {
    const rows = ((await this.#scripts.run("recent", [now, endpointId, limit + 1, before ?? "", status ?? ""])) as JobReply[]).map(
      replyFields,
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    // Queued jobs are listed in queue order: their cursor is the seq.
    return { jobs: page.map(toJob), next: rows.length > limit ? String(status === "IN_QUEUE" ? last!.seq : last!.rid) : undefined };
  }

  async touchWorker(workerId: string, endpointId: string, keyId: string, now: number, report?: WorkerReport): Promise<WorkerTouch | null> {
    const r = await this.#scripts.run("touch", [
      now,
      workerId,
      endpointId,
      report?.runningIds ? JSON.stringify(report.runningIds) : "",
      report?.unhealthy ? JSON.stringify(report.unhealthy) : "",
      report?.unhealthy !== undefined ? "1" : "0",
      report?.runningIds && report.missingAfterMs !== undefined ? report.missingAfterMs : "",
      keyId,
      report?.knownOnly ? "1" : "",
    ]);
    if (r === 0) return null;
    if (typeof r !== "string") return { requeued: [], lost: [] };
    // cjson writes an empty table as {}, not [].
    const settled = JSON.parse(r) as Record<"requeued" | "lost", unknown>;
    const list = (v: unknown) => (Array.isArray(v) ? (v as string[]) : []);
    return { requeued: list(settled.requeued), lost: list(settled.lost) };
  }

  async takeStops(workerId: string): Promise<string[]> {
    return (await this.#scripts.run("takeStops", [0, workerId])) as string[];
  }

  async sweep(now: number, workerLossTimeoutMs: number): Promise<SweepReport> {
    const total: SweepReport = { expired: 0, timedOut: [], requeued: [], lost: [] };
    for (;;) {
      const r = JSON.parse(await this.#scripts.run("sweep", [now, workerLossTimeoutMs, SWEEP_BATCH]));
      const list = (v: unknown) => (Array.isArray(v) ? v : []);
      total.expired += r.expired;
      total.timedOut.push(...list(r.timedOut));
      total.requeued.push(...list(r.requeued));
      total.lost.push(...list(r.lost));
      if (r.expired < SWEEP_BATCH && list(r.timedOut).length < SWEEP_BATCH && r.keys < SWEEP_BATCH) return total;
    }
  }

  async scalingStats(endpointId: string, now: number, workerLossTimeoutMs: number): Promise<ScalingStats> {
    const r = JSON.parse(await this.#scripts.run("scaling", [now, endpointId, workerLossTimeoutMs]));
    return { ...r, workers: Array.isArray(r.workers) ? r.workers : [] };
  }

  async forgetWorker(workerId: string): Promise<void> {
    await this.#scripts.run("forget", [0, workerId]);
  }

  async queueDepth(endpointId: string, now: number): Promise<number> {
    return Number(await this.#client.send("ZCOUNT", [`${this.#prefix}st:${endpointId}:IN_QUEUE`, `(${now}`, "+inf"]));
  }

  async usage(): Promise<UsageRow[]> {
    const jobs = await this.#hash("usage:jobs");
    const costs = await this.#hash("usage:cost");
    return Object.keys(jobs)
      .sort()
      .map((k) => {
        const [keyId, endpointId] = k.split("\n") as [string, string];
        return { keyId, endpointId, jobs: Number(jobs[k]), cost: Number(costs[k] ?? 0) / 1e10 };
      });
  }

  async takeDueDeliveries(now: number, leaseMs: number, limit: number): Promise<WebhookDelivery[]> {
    const rows = (await this.#scripts.run("takeDue", [now, leaseMs, limit])) as [string, string, string, JobReply][];
    return rows.map(([id, url, attempts, job]) => ({ id, url, job: endedFromReply(job), attempts: Number(attempts) }));
  }

  async deliveryDone(id: string): Promise<void> {
    await this.#client.send("DEL", [`${this.#prefix}dl:${id}`]);
    await this.#client.send("ZREM", [`${this.#prefix}dl`, id]);
  }

  async deliveryRetry(id: string, nextAt: number): Promise<void> {
    await this.#scripts.run("deliveryRetry", [0, id, nextAt]);
  }

  admitRequest(bucket: string, limit: RequestLimit, windowMs: number, now: number): Promise<Admission> {
    return this.#admission.admit(bucket, limit, windowMs, now);
  }

  async tryLease(name: string, holder: string, ttlMs: number, now: number): Promise<boolean> {
    return (await this.#scripts.run("lease", [now, name, holder, ttlMs])) === 1;
  }

  async addStartFailure(endpointId: string, failure: StartFailure): Promise<StartFailureRun> {
    const [attempts, first, perm] = (await this.#scripts.run("startFailed", [
      failure.at,
      endpointId,
      failure.at,
      failure.permanent ? "1" : "0",
      JSON.stringify(failure),
    ])) as [number, string, string];
    return { attempts: Number(attempts), firstAt: Number(first), permanent: perm === "1", last: failure };
  }

  async startFailureRuns(): Promise<Record<string, StartFailureRun>> {
    return runsFromHash(await this.#hash("startfail"));
  }

  async endStartFailures(endpointId: string): Promise<void> {
    await this.#scripts.run("startEnded", [0, endpointId]);
  }

  async addKey(key: ApiKeyRecord): Promise<void> {
    const added = await this.#client.send("HSETNX", [`${this.#prefix}keys`, key.hash, JSON.stringify(key)]);
    if (Number(added) !== 1) throw new Error("an API key with this hash exists already");
  }

  async findKey(hash: string): Promise<ApiKeyRecord | null> {
    const r = (await this.#client.send("HGET", [`${this.#prefix}keys`, hash])) as string | null;
    return r ? JSON.parse(r) : null;
  }

  async listKeys(): Promise<ApiKeyRecord[]> {
    const all = (await this.#client.send("HVALS", [`${this.#prefix}keys`])) as string[];
    return all.map((k) => JSON.parse(k) as ApiKeyRecord).sort((a, b) => a.createdAt - b.createdAt);
  }

  async revokeKey(idOrName: string, now: number): Promise<boolean> {
    return Number(await this.#scripts.run("revokeKey", [now, idOrName])) > 0;
  }

  async close(): Promise<void> {
    this.#closing = true;
    await this.#admission.close(); // its give-back is still bounded by the watch
    this.#watch.stop();
    this.#subscriber.close();
    this.#client.close();
  }
}
