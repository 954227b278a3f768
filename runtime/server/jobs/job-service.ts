import type { Clock } from "../../clock.ts";
import { findEndpoint, type Config } from "../../config/config.ts";
import type { JobRequest } from "../../protocol/job-request.ts";
import { BACKPRESSURE, isFinal } from "../../protocol/limits.ts";
import type { InputSchemas } from "./input-schemas.ts";
import { topics } from "../store/store-events.ts";
import {
  IdempotencyConflictError,
  IdempotencyJobGoneError,
  QueueFullError,
  type EndedJob,
  type EnqueuedJob,
  type JobResult,
  type RetryOutcome,
  type Store,
  type StoredJob,
  type StreamRead,
  type WorkerTouch,
} from "../store/store.ts";
import type { Log } from "../../log.ts";
import { waitFor } from "./wait-for.ts";
import { bodyHash, idempotencyConflict, idempotencyGone, replayOnly } from "./idempotency.ts";
import type { Resolver } from "./webhook-address.ts";
import { checkSubmission, newJobOf, type SubmitOptions } from "./submission.ts";
import type { JobEvents } from "./job-events.ts";
import { RefusedError } from "./refused.ts";
import { tracing } from "../../telemetry/tracing.ts";
import { recordResult, recordTake, tracedSubmit } from "./job-spans.ts";

export type { SubmitOptions } from "./submission.ts";

/** A job-take waiting on this server: a submission may hand it a job directly. */
interface Taker {
  workerId: string;
  /** Its wait is over: it must never be parked or chosen again. */
  done: boolean;
  signal: AbortSignal | undefined;
  /** The job handed over, once its write has committed. */
  handed: StoredJob[] | null;
  /** A hand-off chose this taker and its write has not committed yet. */
  pending: Promise<void> | null;
  wake: () => void;
  /** Looking at the queue again: not handed a job meanwhile (it may be about to return), but it keeps its place. */
  claiming?: boolean;
}

/**
 * The one job path between the routes and the store: submit (input check, backpressure,
 * enqueue), wait for a final state, read new stream chunks, take, finish and cancel. Every
 * route that submits or waits goes through it, and it emits the job events.
 */
export class JobService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #events: JobEvents;
  readonly #inputSchemas: InputSchemas | undefined;
  readonly #log: Log | undefined;
  readonly #wake: { events: Store["events"]; clock: Clock };
  /** Takers waiting per endpoint, longest waiting first. */
  readonly #parked = new Map<string, Set<Taker>>();

  readonly #resolver: Resolver | undefined;
  readonly #refusal: ((endpointId: string) => Error | undefined) | undefined;

  constructor(deps: {
    store: Store;
    clock: Clock;
    config: Config;
    jobEvents: JobEvents;
    inputSchemas?: InputSchemas;
    log?: Log;
    /** Whether the endpoint refuses work now (its workers cannot start): the error to answer. */
    startFailures?: { refusal(endpointId: string): Error | undefined };
    resolver?: Resolver;
  }) {
    this.#resolver = deps.resolver;
    this.#refusal = deps.startFailures && ((ep) => deps.startFailures!.refusal(ep));
    this.#log = deps.log;
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#events = deps.jobEvents;
    this.#inputSchemas = deps.inputSchemas;
    this.#wake = { events: deps.store.events, clock: deps.clock };
  }

  /** Checks the input against the endpoint's schema and the queue against backpressure, then enqueues. */
  submit(endpointId: string, request: JobRequest, options: SubmitOptions): Promise<EnqueuedJob> {
    if (!tracing) return this.#submit(endpointId, request, options);
    return tracedSubmit(tracing, endpointId, options, (traced) => this.#submit(endpointId, request, traced));
  }

  async #submit(endpointId: string, request: JobRequest, options: SubmitOptions): Promise<EnqueuedJob> {
    const endpoint = findEndpoint(this.#config, endpointId);
    if (!endpoint) throw new RefusedError("endpoint-not-found", `endpoint ${endpointId} not found`);
    const loading = this.#inputSchemas?.get(endpointId);
    const schema = loading instanceof Promise ? await loading : loading;
    const checking = checkSubmission(this.#config, endpoint, schema, request, options, this.#resolver);
    if (checking) await checking;
    const refused = this.#refusal?.(endpointId);
    if (refused) {
      // A retry of a submission accepted before the endpoint began refusing gets its job.
      const key = options.idempotencyKey;
      const replayed =
        key === undefined ? undefined : await replayOnly(this.#store, options.keyId, endpointId, key, bodyHash(request), this.#clock.now());
      if (replayed) return replayed;
      throw refused;
    }
    // The backpressure check runs inside enqueue, so a submission costs the store one step.
    const maxQueued = Math.max(BACKPRESSURE.minQueue, endpoint.workersMax * BACKPRESSURE.perWorker);
    // A worker waiting in job-take gets the job in the same write when nothing else is queued.
    const taker = this.#unpark(endpointId);
    const handed = Promise.withResolvers<void>();
    if (taker) taker.pending = handed.promise;
    // Time-ordered (UUIDv7: the millisecond, a counter, 62 random bits): a new job's id lands at the
    // end of the store's id index instead of on a random page, so a commit writes fewer pages.
    const id = `${options.sync ? "sync-" : ""}${Bun.randomUUIDv7()}`;
    const newJob = newJobOf(id, endpointId, endpoint, request, options, this.#config.server.idempotencyTtlMs);
    const job = await this.#store.enqueue(newJob, this.#clock.now(), maxQueued, taker?.workerId).catch(async (err: unknown) => {
      if (err instanceof IdempotencyConflictError || err instanceof IdempotencyJobGoneError) {
        if (taker) this.#settleHandOff(endpointId, taker, null, handed.resolve);
        throw err instanceof IdempotencyConflictError ? idempotencyConflict(err) : idempotencyGone(err);
      }
      const full = err instanceof QueueFullError;
      if (taker) {
        // A write whose answer was lost (Redis) may have handed the job all the same: it goes back
        // in the queue rather than waiting on a worker that never gets it (no-op if it was not written).
        if (!full) await this.#store.returnJobs(taker.workerId, [id], this.#clock.now()).catch(() => {});
        this.#settleHandOff(endpointId, taker, null, handed.resolve);
      }
      if (!full) throw err;
      this.#events.emit({ type: "refused", endpointId, reason: "backpressure" });
      throw new RefusedError(
        "queue-full",
        `the queue of ${endpointId} is full (${err.depth} jobs waiting); retry with exponential backoff`,
        1,
      );
    });
    if (!taker || job.status !== "IN_PROGRESS" || job.replayed) {
      if (taker) this.#settleHandOff(endpointId, taker, null, handed.resolve);
      // A replay made no job: the earlier submission was counted.
      if (!job.replayed) this.#events.emit({ type: "submitted", job });
      return job;
    }
    // Accepted (IN_QUEUE, as every submission is answered) and taken in the same instant.
    const accepted: StoredJob = { ...job, status: "IN_QUEUE", startedAt: undefined, deadline: undefined, workerId: undefined };
    this.#events.emit({ type: "submitted", job: accepted });
    this.#settleHandOff(endpointId, taker, job, handed.resolve);
    return accepted;
  }

  /** The longest-waiting taker of the endpoint whose client is still there and that is not claiming, taken off the list. */
  #unpark(endpointId: string): Taker | undefined {
    const parked = this.#parked.get(endpointId);
    if (!parked) return undefined;
    for (const taker of parked) {
      if (taker.claiming) continue;
      parked.delete(taker);
      if (!taker.done && !taker.signal?.aborted) return taker;
    }
    return undefined;
  }

  /** A hand-off's write settled: the taker gets its job, or goes back to waiting. */
  #settleHandOff(endpointId: string, taker: Taker, job: StoredJob | null, done: () => void): void {
    taker.pending = null;
    if (job) taker.handed = [job];
    else this.#park(endpointId, taker);
    done();
    taker.wake();
  }

  #park(endpointId: string, taker: Taker): void {
    if (taker.done || !this.#store.handsOff) return;
    let parked = this.#parked.get(endpointId);
    if (!parked) this.#parked.set(endpointId, (parked = new Set()));
    parked.add(taker);
  }

  /** The job as it is once final, or after `ms` (null when it does not exist or is gone). */
  async waitForFinal(endpointId: string, jobId: string, ms: number, signal?: AbortSignal): Promise<StoredJob | null> {
    let latest: StoredJob | null = null;
    const final = await waitFor(
      this.#wake,
      topics.job(jobId),
      ms,
      async () => {
        latest = await this.#store.get(endpointId, jobId, this.#clock.now());
        return !latest || isFinal(latest.status) ? { job: latest } : null;
      },
      signal,
    );
    return final ? final.job : latest;
  }

  /**
   * Stream chunks not yet read and the job, waiting up to `ms` for a chunk or a final state;
   * null when the job does not exist or is gone. Reads once more at the end of the wait unless
   * the client went away.
   */
  async readStream(endpointId: string, jobId: string, ms: number, signal?: AbortSignal): Promise<StreamRead | null> {
    const read = await waitFor(
      this.#wake,
      topics.job(jobId),
      ms,
      async () => {
        const r = await this.#store.readStream(endpointId, jobId, this.#clock.now());
        return !r || r.chunks.length > 0 || isFinal(r.job.status) ? { r } : null;
      },
      signal,
    );
    if (read) return read.r;
    if (signal?.aborted) return null;
    return this.#store.readStream(endpointId, jobId, this.#clock.now());
  }

  /**
   * The job and its chunks from index `from` on, marking nothing read, waiting up to `ms` until
   * there is a chunk, `changed(job)` holds or `more()` (read after the job: SSE's log lines) says
   * there is something new; null when the job does not exist or is gone. Several
   * readers of one job each keep their own position (server-sent events, the dashboard).
   */
  async watch(
    endpointId: string,
    jobId: string,
    from: number,
    changed: (job: StoredJob) => boolean,
    ms: number,
    signal?: AbortSignal,
    more?: () => Promise<boolean>,
  ): Promise<StreamRead | null> {
    let latest: StreamRead | null = null;
    const found = await waitFor(
      this.#wake,
      topics.job(jobId),
      ms,
      async () => {
        latest = await this.#store.readChunks(endpointId, jobId, from, this.#clock.now());
        if (!latest) return { r: latest };
        const other = more ? await more() : false;
        return latest.chunks.length > 0 || changed(latest.job) || other ? { r: latest } : null;
      },
      signal,
    );
    return found ? found.r : latest;
  }

  /**
   * Claims up to `max` queued jobs for a worker, waiting up to `ms` for one; null when none came
   * or the worker went away (which is then handed nothing). While it waits, a submission to the
   * endpoint may hand it its job directly (see submit).
   */
  async take(endpointId: string, workerId: string, max: number, ms: number, signal?: AbortSignal): Promise<StoredJob[] | null> {
    const claim = async (): Promise<StoredJob[] | null> => {
      if (signal?.aborted) return null;
      const claimed = await this.#store.claim(endpointId, workerId, max, this.#clock.now());
      return claimed.length ? claimed : null;
    };
    // A take that may wait claims in its wait's first look (one claim, not two, before it parks:
    // on Redis each is a round trip).
    const waits = ms > 0 && !signal?.aborted;
    let jobs = waits ? null : await claim();
    if (waits) {
      const taker: Taker = { workerId, done: false, signal, handed: null, pending: null, wake: () => {} };
      try {
        jobs = await waitFor(
          this.#wake,
          topics.queue(endpointId),
          ms,
          async () => {
            if (taker.handed) return taker.handed;
            if (taker.pending) return null; // chosen for a hand-off: its write settles within a tick
            // Passed over by hand-offs while it claims (it may be about to return), in its place in
            // line (Redis re-checks every few seconds: the longest-waiting taker stays first).
            taker.claiming = true;
            const claimed = await claim();
            if (claimed) return claimed;
            taker.claiming = false;
            this.#park(endpointId, taker);
            return null;
          },
          signal,
          (wake) => (taker.wake = wake),
        );
      } finally {
        taker.done = true;
        this.#parked.get(endpointId)?.delete(taker);
      }
      // The wait ended (time up or the client gone) just as a hand-off was being written.
      if (!jobs && taker.pending) await taker.pending;
      jobs ??= taker.handed;
      // A batch taker handed one job also gets what was queued beside it (submitted in the same turn).
      if (jobs && jobs === taker.handed && max > jobs.length && !signal?.aborted) {
        jobs = [...jobs, ...(await this.#store.claim(endpointId, workerId, max - jobs.length, this.#clock.now()))];
      }
    }
    if (jobs && signal?.aborted) {
      // The worker went away as its jobs were written: they go back in their place, and its
      // going away counts as no loss against them.
      // If the store cannot take them back now, the worker-loss rule will.
      await this.#store
        .returnJobs(
          workerId,
          jobs.map((j) => j.id),
          this.#clock.now(),
        )
        .catch(() => {});
      return null;
    }
    if (jobs && this.#events.listening) for (const job of jobs) this.#events.emit({ type: "taken", job, workerId });
    if (jobs && tracing) recordTake(tracing, jobs, workerId, this.#clock.now());
    return jobs;
  }

  /** A worker's result; idempotent (a repeated or late post changes nothing). */
  async finish(workerId: string, jobId: string, result: JobResult, streamOutput: boolean, cost?: number): Promise<EndedJob | null> {
    const now = this.#clock.now();
    const job = await this.#store.finish(workerId, jobId, result, streamOutput, now, cost);
    if (job) this.#events.emit({ type: "ended", job });
    if (job && tracing) recordResult(tracing, job, now, this.#clock.now());
    return job;
  }

  /**
   * Jobs a worker's heartbeat settled by the worker-loss rule (it no longer listed them): logged,
   * and those it failed (lost twice) have ended, as a result's end is. Their webhook calls were
   * recorded by the store in the same step.
   */
  async workerLosses(endpointId: string, workerId: string, settled: WorkerTouch): Promise<void> {
    for (const jobId of settled.requeued) this.#log?.warn("worker lost a job; job re-queued", { jobId, workerId });
    for (const jobId of settled.lost) {
      this.#log?.warn("worker lost a job twice; job failed", { jobId, workerId });
      const job = this.#events.listening ? await this.#store.get(endpointId, jobId, this.#clock.now()) : null;
      if (job) this.#events.emit({ type: "ended", job });
    }
  }

  /** Queues a FAILED or TIMED_OUT job again. */
  async retry(endpointId: string, jobId: string): Promise<RetryOutcome> {
    const outcome = await this.#store.retry(endpointId, jobId, this.#clock.now());
    if (outcome.kind === "retried") this.#events.emit({ type: "retried", job: outcome.job });
    return outcome;
  }

  /** Removes the endpoint's queued jobs; returns how many. */
  async purge(endpointId: string): Promise<number> {
    const count = await this.#store.purgeQueue(endpointId, this.#clock.now());
    if (count > 0) this.#events.emit({ type: "purged", endpointId, count });
    return count;
  }

  /** Cancels a queued or running job; a finished job is returned unchanged. */
  async cancel(endpointId: string, jobId: string): Promise<StoredJob | null> {
    const now = this.#clock.now();
    const outcome = await this.#store.cancel(endpointId, jobId, now);
    // A job already final is returned as it was: only one cancelled by this call has ended now.
    if (outcome?.cancelled) this.#events.emit({ type: "ended", job: outcome.job });
    return outcome?.job ?? null;
  }
}
