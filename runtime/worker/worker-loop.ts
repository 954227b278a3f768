import type { Clock } from "../clock.ts";
import { EXIT_REPLACE } from "../protocol/exit-codes.ts";
import type { Log } from "../log.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import type { Handler } from "../../sdk/define-handler.ts";
import { execute } from "./executor.ts";
import { resultBody } from "./result-body.ts";
import { isPermanentStartError } from "./start-failure.ts";
import { jobContext, stopReasons } from "./job-context.ts";
import type { OwnerLink } from "./owner-link.ts";
import type { WorkerApi } from "./worker-api.ts";
import { JobLogBuffer } from "./job-log-buffer.ts";
import type { OutputCapture } from "./output-capture.ts";
import type { LogLevel } from "../protocol/job-log.ts";
import { tracing } from "../telemetry/tracing.ts";
import { handlerSpan } from "./handler-span.ts";

export { EXIT_REPLACE };

export interface WorkerLoopOptions {
  handler: Handler;
  api: WorkerApi;
  workerId: string;
  clock: Clock;
  log: Log;
  /** Heartbeat interval (RUNPOD_PING_INTERVAL). @default 10000 */
  pingIntervalMs: number;
  /** How long a handler may run on after its signal fired at the deadline. @default 5000 */
  timeoutGraceMs: number;
  /** On shutdown, how long running jobs may finish before their signal fires. @default 30000 */
  drainTimeoutMs: number;
  /**
   * Shut down after this long with nothing running and no job taken; 0: never. Checked when an
   * empty take returns, so the exit comes up to the server's takeWaitMs later. @default 0
   */
  exitWhenIdleMs?: number;
  /** Ends the process: a handler stuck past its grace must not hold the worker. */
  exit: (code: number) => void;
  /** The endpoint's handler options, already parsed (given to setup and ctx.options). */
  handlerOptions?: unknown;
  /**
   * The process's owner, when one watches it: told when jobs start and end, so it can enforce
   * deadlines from outside, and the source of the stop list (it relays cancels, and ends the
   * process when a cancelled handler does not stop). Without one, the worker polls job-stop.
   */
  owner?: OwnerLink;
  /**
   * What the process prints (console, stdout, stderr), copied to the job's log while exactly one
   * job runs; none in tests that run the loop inside their own process.
   */
  capture?: OutputCapture;
  /** How long a job's log lines may wait before they are sent. @default 1000 */
  logFlushMs?: number;
}

interface Running {
  controller: AbortController;
  finished: Promise<void>;
}

const DEFAULT_LOG_FLUSH_MS = 1_000;

/** Takes jobs, runs up to the handler's concurrency, heartbeats, and obeys the stop channel. */
export class WorkerLoop {
  readonly #o: WorkerLoopOptions;
  readonly #running = new Map<string, Running>();
  /** Logs of jobs whose handler is running (the one the process's output is copied to when it is alone). */
  readonly #executing = new Map<string, JobLogBuffer>();
  readonly #stopping = new AbortController();
  readonly #loopsDone = new AbortController();
  #concurrency = 1;
  #exitCode = 0;
  /** When the worker last had a job start or end: idleness counts from there. */
  #lastBusy = 0;
  /** Wakes run() when a slot frees or shutdown starts (set only while it waits). */
  #wake: (() => void) | undefined;

  constructor(options: WorkerLoopOptions) {
    this.#o = options;
  }

  get runningIds(): string[] {
    return [...this.#running.keys()];
  }

  /** Stops taking jobs; running ones drain. Resolves run() with `code`. */
  shutdown(code = 0): void {
    if (this.#stopping.signal.aborted) return;
    this.#exitCode = code;
    this.#stopping.abort();
    this.#wake?.();
  }

  #nextConcurrency(): number {
    const c = this.#o.handler.concurrency ?? 1;
    const next = typeof c === "function" ? c(this.#concurrency) : c;
    this.#concurrency = Math.max(1, Math.floor(Number.isFinite(next) ? next : 1));
    return this.#concurrency;
  }

  /** Runs until shutdown() and the drain are over; returns the exit code. */
  async run(): Promise<number> {
    const { api, log } = this.#o;
    try {
      await this.#o.handler.setup?.(this.#o.handlerOptions);
    } catch (err) {
      await api.reportStartFailure(err instanceof Error ? `${err.name}: ${err.message}` : String(err), isPermanentStartError(err));
      throw err;
    }
    const { owner, workerId, drainTimeoutMs, timeoutGraceMs } = this.#o;
    owner?.report({ type: "hello", workerId, drainMs: drainTimeoutMs + timeoutGraceMs });
    const side = [this.#pingLoop(), this.#stopLoop()];
    log.info("worker ready", { workerId: this.#o.workerId });
    this.#lastBusy = this.#o.clock.now();
    while (!this.#stopping.signal.aborted) {
      const free = this.#nextConcurrency() - this.#running.size;
      if (free <= 0) {
        // One resolver per wait, dropped when it fires: a listener on the long-lived stop signal
        // per job would pile up (a worker slowed with every job it ran, O(n) per listener added).
        const { promise, resolve } = Promise.withResolvers<void>();
        this.#wake = resolve;
        await promise;
        this.#wake = undefined;
        continue;
      }
      const jobs = await api.take(free, this.#running.size > 0, this.#stopping.signal);
      for (const job of jobs) this.#start(job);
      if (jobs.length) this.#lastBusy = this.#o.clock.now();
      else if (this.#o.exitWhenIdleMs && !this.#running.size && this.#o.clock.now() - this.#lastBusy >= this.#o.exitWhenIdleMs) {
        log.info("idle; exiting", { idleMs: this.#o.clock.now() - this.#lastBusy });
        this.shutdown(0);
      }
    }
    await this.#drain();
    this.#loopsDone.abort();
    await Promise.all(side);
    return this.#exitCode;
  }

  async #drain(): Promise<void> {
    const { clock, log } = this.#o;
    const all = () => Promise.all([...this.#running.values()].map((r) => r.finished));
    if (!this.#running.size) return;
    log.info("draining", { running: this.runningIds });
    const timer = new AbortController();
    await Promise.race([all(), clock.sleep(this.#o.drainTimeoutMs, timer.signal)]);
    if (this.#running.size) {
      for (const r of this.#running.values()) r.controller.abort(stopReasons.shutdown());
      await Promise.race([all(), clock.sleep(this.#o.timeoutGraceMs, timer.signal)]);
    }
    timer.abort();
  }

  #start(job: TakenJob): void {
    const { api, clock, log, handler, workerId } = this.#o;
    const controller = new AbortController();
    const ended = new AbortController();
    let refresh = false;
    const logs = new JobLogBuffer((lines) => api.logs(job.id, lines), clock, this.#o.logFlushMs ?? DEFAULT_LOG_FLUSH_MS);
    const line = (level: LogLevel, message: string) => logs.add(level, message);
    const ctx = jobContext({
      job,
      workerId,
      signal: controller.signal,
      log,
      line,
      progress: async (v) => (await logs.flush(), api.progress(job.id, v)),
      files: (jobId, name, data, type) => api.upload(jobId, name, data, type),
      onRefresh: () => (refresh = true),
      handlerOptions: this.#o.handlerOptions,
    });
    // The deadline counts from receipt on this machine's clock, so clock skew cannot shorten it.
    const timeoutMs = job.policy.executionTimeout;
    this.#o.owner?.report({ type: "job-start", jobId: job.id, timeoutMs, graceMs: this.#o.timeoutGraceMs });
    void clock.sleep(timeoutMs, ended.signal).then(async () => {
      if (ended.signal.aborted) return;
      log.warn("execution timeout reached; signalling the handler", { jobId: job.id, timeoutMs });
      controller.abort(stopReasons.timedOut(timeoutMs));
      await clock.sleep(this.#o.timeoutGraceMs, ended.signal);
      if (ended.signal.aborted) return;
      log.error("handler ignored its signal past the grace period; ending the worker process", { jobId: job.id });
      this.#o.exit(EXIT_REPLACE);
    });

    let endReported = false;
    const reportEnd = () => {
      if (endReported) return;
      endReported = true;
      this.#o.owner?.report({ type: "job-end", jobId: job.id });
    };
    const finished = (async () => {
      try {
        this.#executing.set(job.id, logs);
        this.#captureTo();
        const run = () => execute(handler, job, ctx, async (chunk) => (await logs.flush(), api.stream(job.id, chunk)));
        const outcome = await (tracing ? handlerSpan(tracing, job, workerId, run) : run()).finally(() => {
          this.#executing.delete(job.id);
          this.#captureTo();
        });
        ended.abort();
        // The handler is done: the owner stops timing the job now, so a result post that is slow
        // or retried never gets a finished job's process ended for its deadline.
        reportEnd();
        // Every line reaches the server before the result that ends the job (and its log).
        await logs.close();
        const stopPod = refresh ? { stopPod: true } : {};
        if (outcome.kind === "output")
          await api.done(job.id, resultBody({ output: outcome.output, ...stopPod }, workerId), outcome.isStream);
        else if (outcome.kind === "error") await api.done(job.id, resultBody({ error: outcome.error, ...stopPod }, workerId), false);
        else
          log.info("job stopped; no result posted", { jobId: job.id, reason: String((outcome.reason as Error)?.name ?? outcome.reason) });
      } catch (err) {
        // Whatever went wrong here, the slot comes back and the worker goes on (the job's
        // heartbeat stops listing it, so the server's worker-loss rule takes it over).
        log.error("posting the job's result failed", { jobId: job.id, error: String(err) });
      } finally {
        void logs.close();
        ended.abort();
        reportEnd();
        this.#running.delete(job.id);
        this.#lastBusy = clock.now();
        this.#wake?.();
      }
      if (refresh) this.shutdown(EXIT_REPLACE);
    })();
    this.#running.set(job.id, { controller, finished });
  }

  /** The process's output goes to the log of the one job running, or to none when several (or none) run. */
  #captureTo(): void {
    const capture = this.#o.capture;
    if (!capture) return;
    const only = this.#executing.size === 1 ? [...this.#executing.values()][0]! : undefined;
    capture.sink = only && ((level, message) => only.add(level, message));
  }

  async #pingLoop(): Promise<void> {
    while (!this.#loopsDone.signal.aborted) {
      await this.#o.api.ping(this.runningIds);
      await this.#o.clock.sleep(this.#o.pingIntervalMs, this.#loopsDone.signal);
    }
  }

  async #stopLoop(): Promise<void> {
    const stops = this.#o.owner?.stops ?? ((signal: AbortSignal) => this.#o.api.stops(signal));
    while (!this.#loopsDone.signal.aborted) {
      const ids = await stops(this.#loopsDone.signal);
      for (const id of ids) this.#running.get(id)?.controller.abort(stopReasons.cancelled());
    }
  }
}
