import { systemClock, type Clock } from "../clock.ts";
import type { Log } from "../log.ts";
import { isWorkerIpcMessage } from "../protocol/worker-ipc.ts";

export interface OwnedProcess {
  readonly pid: number;
  readonly exited: Promise<number>;
  kill(signal?: NodeJS.Signals | number): void;
}

/**
 * SIGTERM now, SIGKILL after `graceMs` if the process is still there: a worker whose event loop
 * is stuck never runs its SIGTERM handler, so only the second signal ends it. `more` is asked
 * when the grace is over: a further wait before the kill (a worker still draining jobs).
 */
export function terminate(proc: OwnedProcess, graceMs: number, more: () => number = () => 0, clock: Clock = systemClock): void {
  const gone = new AbortController();
  void proc.exited.then(() => gone.abort());
  proc.kill("SIGTERM");
  void (async () => {
    await clock.sleep(graceMs, gone.signal);
    const extra = gone.signal.aborted ? 0 : more();
    if (extra > 0) await clock.sleep(extra, gone.signal);
    if (!gone.signal.aborted) proc.kill("SIGKILL");
  })();
}

/** How many ended job ids a watchdog remembers. */
const ENDED_KEPT = 1_000;
/** The longest job deadline or grace a worker may report (RunPod's longest executionTimeout is 7 days). */
const MAX_REPORTED_MS = 7 * 24 * 3600_000;
/** A reported duration as a number the watchdog can wait on: 0 to MAX_REPORTED_MS. */
const clampMs = (v: unknown): number => Math.min(MAX_REPORTED_MS, Math.max(0, Number.isFinite(v) ? (v as number) : 0));

interface WatchedJob {
  /** How long the handler may run on once its job has ended (deadline or cancel). */
  graceMs: number;
  /** Ends the job's current wait (its deadline, or its grace). */
  wait: AbortController;
}

/**
 * Enforces job limits from outside a worker process: the worker reports each job it starts and
 * ends (WorkerIpcMessage); a job still running at its timeout plus the worker's own grace, or
 * past that grace after a cancel, gets the process terminated, whatever its handler is doing.
 */
export class JobWatchdog {
  readonly #jobs = new Map<string, WatchedJob>();
  /** Jobs this process reported ended lately: a stop that comes for one after is nothing to wait for. */
  readonly #ended = new Set<string>();
  /** Jobs past their timeout or cancelled, and not reported ended. */
  readonly #overdue = new Set<string>();
  #fired = false;

  constructor(
    private readonly proc: OwnedProcess,
    private readonly killGraceMs: number,
    private readonly log: Log,
    private readonly clock: Clock = systemClock,
  ) {
    void proc.exited.then(() => this.#clear());
  }

  /** True once the watchdog ended the process: its exit is a replacement, not a crash. */
  get fired(): boolean {
    return this.#fired;
  }

  /** True while a job runs past its end (timeout or cancel): the process is about to be ended, not idle. */
  get overdue(): boolean {
    return this.#fired || this.#overdue.size > 0;
  }

  /** Jobs the process runs now, as it reported them. */
  get running(): number {
    return this.#jobs.size;
  }

  /** Feed every message of the watch channel here. */
  message = (m: unknown): void => {
    if (!isWorkerIpcMessage(m) || m.type === "hello") return;
    this.#jobs.get(m.jobId)?.wait.abort();
    this.#jobs.delete(m.jobId);
    this.#overdue.delete(m.jobId);
    if (m.type === "job-end") {
      this.#ended.add(m.jobId);
      if (this.#ended.size > ENDED_KEPT) this.#ended.delete(this.#ended.values().next().value!);
      return;
    }
    this.#ended.delete(m.jobId); // a retry of it, handed to this process again
    const job = { graceMs: clampMs(m.graceMs), wait: new AbortController() };
    this.#jobs.set(m.jobId, job);
    this.#after(job, clampMs(m.timeoutMs), () => this.#pastEnd(m.jobId, "ran past its timeout"));
  };

  /** Whether the process reported this job ended (lately). */
  hasEnded(jobId: string): boolean {
    return this.#ended.has(jobId);
  }

  /**
   * A job cancelled on the server: its handler has the job's grace to end, then the process is
   * terminated. False when the process has not reported the job started.
   */
  cancel(jobId: string): boolean {
    const job = this.#jobs.get(jobId);
    if (!job) return false;
    if (!this.#overdue.has(jobId)) this.#pastEnd(jobId, "was cancelled"); // else its grace already runs
    return true;
  }

  /** Runs `then` after `ms` unless the job's wait is ended first (it ended, or a new wait replaced it). */
  #after(job: WatchedJob, ms: number, then: () => void): void {
    const { signal } = job.wait;
    void this.clock.sleep(ms, signal).then(() => signal.aborted || then());
  }

  #pastEnd(jobId: string, why: string): void {
    const job = this.#jobs.get(jobId);
    if (!job) return;
    this.#overdue.add(jobId);
    job.wait.abort();
    job.wait = new AbortController();
    this.#after(job, job.graceMs, () => this.#end(jobId, why));
  }

  #end(jobId: string, why: string): void {
    if (this.#fired) return;
    this.#fired = true;
    this.log.error(`a job ${why} and did not end within its grace; terminating its worker process`, {
      jobId,
      pid: this.proc.pid,
      killGraceMs: this.killGraceMs,
    });
    terminate(this.proc, this.killGraceMs, undefined, this.clock);
  }

  #clear(): void {
    for (const job of this.#jobs.values()) job.wait.abort();
    this.#jobs.clear();
  }
}
