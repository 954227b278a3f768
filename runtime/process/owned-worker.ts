import { closeSync } from "node:fs";
import { systemClock, type Clock } from "../clock.ts";
import type { Log } from "../log.ts";
import { RELAY_STOPS_ENV, WATCH_FD, WATCH_FD_ENV, type OwnerMessage } from "../protocol/worker-ipc.ts";
import { readJsonLines } from "./json-lines.ts";
import { JobWatchdog, terminate, type OwnedProcess } from "./process-stop.ts";

/** One wait on a worker's stop list: the ids of jobs cancelled since, [] when none came in time. */
export type StopSource = (signal: AbortSignal) => Promise<string[]>;

/** Spawn options for a worker process an owner watches: stop lines go in on stdin, the watch channel comes out on fd 3. */
export const watchedStdio = <E extends "inherit" | "pipe">(stderr: E) => ["pipe", "inherit", stderr, "pipe"] as const;
/** The environment of a watched worker; `relaysStops`: its owner will take and relay its stop list (OwnerOptions.stopsFor). */
export const watchEnv = (relaysStops: boolean): Record<string, string | undefined> => ({
  [WATCH_FD_ENV]: String(WATCH_FD),
  [RELAY_STOPS_ENV]: relaysStops ? "1" : undefined,
});

/** A spawned worker process with its watch channel (fd 3) and a stdin its owner writes to. */
export interface WatchedProcess extends OwnedProcess {
  readonly stdin: { write(chunk: string): unknown; flush(): unknown };
  readonly stdio: readonly unknown[];
}

export interface OwnerOptions {
  /** SIGTERM to SIGKILL. */
  killGraceMs: number;
  log: Log;
  /** Where the owner takes a worker's stop list (the store, or the server over HTTP); none: stops are not relayed. */
  stopsFor?: (workerId: string) => StopSource;
  /**
   * The worker id the owner gave the process: a hello naming another is not believed (its
   * handler could otherwise take another endpoint's stop list). Unset: the process's own id.
   */
  workerId?: string;
  /** Times deadlines and graces. @default systemClock */
  clock?: Clock;
}

/** Stop ids kept for jobs not reported started yet (a cancel that overtook the take's answer). */
const PENDING_MAX = 1_000;
/**
 * How long such a stop is kept: a cancel overtakes a take's answer by moments, and an older one
 * must not cancel the same job when a retry hands it to this worker again.
 */
export const PENDING_STOP_MS = 30_000;
/** The longest drain a worker may ask for in its hello (the deadline of its longest job). */
export const MAX_DRAIN_MS = 24 * 3600_000;
/** How long the watch channel is read after the process tree is gone, before its descriptor is closed. */
const CHANNEL_DRAIN_MS = 1_000;

/**
 * The owner's side of a worker process (the scaler's provider, a supervisor): enforces its job
 * deadlines (JobWatchdog) and, once the worker said hello, takes its stop list and relays it, so
 * a cancelled job whose handler does not end within its grace gets the process terminated.
 */
export class OwnedWorker {
  readonly watchdog: JobWatchdog;
  /** How long the worker may drain its running jobs once told to stop (from its hello). */
  #drainMs = 0;
  #workerId: string | undefined;
  /** Stops of jobs not reported started yet, with when each came. */
  readonly #pending = new Map<string, number>();
  readonly #gone = new AbortController();

  constructor(
    private readonly proc: WatchedProcess,
    private readonly options: OwnerOptions,
  ) {
    this.watchdog = new JobWatchdog(proc, options.killGraceMs, options.log, options.clock);
    void proc.exited.then(() => this.#gone.abort());
    const fd = proc.stdio[3];
    if (typeof fd === "number") {
      const reading = readJsonLines(Bun.file(fd).stream(), this.#message);
      // The owner's end of the channel is closed with the worker: a server that restarts
      // workers all day keeps no descriptor per worker it ever ran.
      this.closed = proc.exited
        .then(() => Promise.race([reading, Bun.sleep(CHANNEL_DRAIN_MS)]))
        .then(() => {
          try {
            closeSync(fd);
          } catch {
            // closed already
          }
        });
    } else {
      this.closed = proc.exited.then(() => {});
    }
  }

  /** Resolves once the process is gone and the owner's end of its watch channel is closed. */
  readonly closed: Promise<void>;

  /**
   * True while a stop was relayed for a job the process has not reported started yet (its
   * take's answer and the cancel crossed): it holds a cancelled job, so it is ending, not idle.
   */
  get stopsPending(): boolean {
    const now = this.#now();
    for (const at of this.#pending.values()) if (now - at <= PENDING_STOP_MS) return true;
    return false;
  }

  /** The worker id the process said hello with; undefined until it has. */
  get workerId(): string | undefined {
    return this.#workerId;
  }

  /**
   * Asks the worker to drain and stop (SIGTERM), and kills it after `graceMs`; by default after
   * the kill grace, plus the worker's drain time while it still runs jobs.
   */
  stop(graceMs?: number): void {
    const { killGraceMs, clock } = this.options;
    if (graceMs !== undefined) return terminate(this.proc, graceMs, undefined, clock);
    terminate(this.proc, killGraceMs, () => (this.watchdog.running > 0 ? this.#drainMs : 0), clock);
  }

  #message = (m: unknown): void => {
    const msg = m as { type?: string; workerId?: unknown; drainMs?: unknown; jobId?: string };
    if (msg.type === "hello" && typeof msg.workerId === "string") {
      const expected = this.options.workerId;
      if (expected !== undefined && msg.workerId !== expected) {
        // Its stops could not be relayed: a process nobody can cancel is not left running.
        this.options.log.warn("a worker process said hello with a worker id it was not given; ending it", {
          pid: this.proc.pid,
          expected,
          said: msg.workerId,
        });
        this.proc.kill("SIGKILL");
        return;
      }
      this.#drainMs = Math.min(MAX_DRAIN_MS, Math.max(0, Number(msg.drainMs) || 0));
      if (this.#workerId === undefined && this.options.stopsFor) void this.#relay(this.options.stopsFor(msg.workerId));
      this.#workerId = msg.workerId;
      return;
    }
    this.watchdog.message(m);
    if (msg.type === "job-start" && msg.jobId && this.#pending.has(msg.jobId)) {
      const at = this.#pending.get(msg.jobId)!;
      this.#pending.delete(msg.jobId);
      if (this.#now() - at <= PENDING_STOP_MS) this.#cancel([msg.jobId]);
    }
  };

  async #relay(stops: StopSource): Promise<void> {
    const signal = this.#gone.signal;
    while (!signal.aborted) {
      let ids: string[];
      try {
        ids = await stops(signal);
      } catch (err) {
        if (signal.aborted) return;
        this.options.log.warn("could not take a worker's stop list; retrying in 1 s", { pid: this.proc.pid, error: String(err) });
        await (this.options.clock ?? systemClock).sleep(1_000, signal);
        continue;
      }
      if (ids.length && !signal.aborted) this.#cancel(ids);
    }
  }

  /** Tells the worker (its handler's signal fires) and gives each running job its grace. */
  #cancel(ids: string[]): void {
    try {
      this.proc.stdin.write(`${JSON.stringify({ type: "stop", jobIds: ids } satisfies OwnerMessage)}\n`);
      // A pipe closed by an exit in between rejects the flush: nothing to tell then.
      void Promise.resolve(this.proc.stdin.flush()).catch(() => {});
    } catch {
      // the process is gone
    }
    for (const id of ids) {
      // Running: its grace starts. Ended already (its stop came late): nothing to wait for.
      if (this.watchdog.cancel(id) || this.watchdog.hasEnded(id)) continue;
      this.#pending.delete(id);
      this.#pending.set(id, this.#now());
      if (this.#pending.size > PENDING_MAX) this.#pending.delete(this.#pending.keys().next().value!);
    }
  }

  #now(): number {
    return (this.options.clock ?? systemClock).now();
  }
}
