import { hostname } from "node:os";
import type { Clock } from "../../clock.ts";
import { startsWorkers, type Config } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import { WORKER_START_ERROR_TYPE, type StartErrorReport } from "../../protocol/job-response.ts";
import type { JobEvents } from "../jobs/job-events.ts";
import { RefusedError } from "../jobs/refused.ts";
import { topics } from "../store/store-events.ts";
import type { StartFailure, StartFailureRun, Store } from "../store/store.ts";
import { startErrorMessage, type StartExit } from "./start-error-message.ts";

export interface StartFailuresDeps {
  config: Config;
  clock: Clock;
  log: Log;
  store: Store;
  jobEvents: JobEvents;
  /** Told of every failed start. */
  metrics?: { startFailed(endpointId: string): void };
}

/** Retry-After for an endpoint whose outside workers report start failures: when one may have been restarted. */
const REPORTED_RETRY_MS = 10_000;
/** Queued jobs failed a store call: a long queue never holds the store (Redis: every server) in one step. */
const FAIL_BATCH = 500;

/**
 * Workers that exit before they are ready, per endpoint: its run of failed starts since a worker
 * last reached a server, kept in the store so that every server on it answers alike. On an
 * endpoint with onStartFailure "fail" the run refuses work (its queued jobs end FAILED naming the
 * error, new submissions get 503) at its first permanent failure (the handler cannot load), or
 * once it has both `startFailureLimit` failures and lasted `startFailureWindowMs`; with "queue"
 * jobs keep waiting. Each server keeps the runs in memory, read again whenever the store announces
 * a change, so a submission's check costs no store call.
 */
export class StartFailures {
  readonly #deps: StartFailuresDeps;
  #runs = new Map<string, StartFailureRun>();
  /** Endpoints whose run this server is ending: a read from before the end does not bring it back. */
  readonly #ending = new Set<string>();
  #reading: Promise<void> | undefined;
  /** A change happened during the read in progress: its result is stale, so it reads again. */
  #again = false;
  readonly #off: () => void;

  constructor(deps: StartFailuresDeps) {
    this.#deps = deps;
    this.#off = deps.store.events.on(topics.startFailures, () => void this.refresh());
    void this.refresh();
  }

  /** Reads every endpoint's run from the store (reads asked for during one are made once, after it). */
  refresh(): Promise<void> {
    if (this.#reading) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = (async () => {
      do {
        this.#again = false;
        try {
          const runs = Object.entries(await this.#deps.store.startFailureRuns());
          if (!this.#again) this.#runs = new Map(runs.filter(([ep]) => !this.#ending.has(ep)));
        } catch (err) {
          this.#deps.log.warn("could not read the endpoints' failed worker starts", { error: String(err) });
        }
      } while (this.#again);
    })().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  close(): void {
    this.#off();
  }

  /**
   * A worker of the endpoint ended before it was ready; `retryInMs` is when the next start is
   * tried; `permanent`: the handler cannot load, so trying again will not help.
   */
  async failed(endpointId: string, workerId: string, exit: StartExit, retryInMs: number, permanent = false): Promise<void> {
    const { clock, log, metrics, config, store } = this.#deps;
    if (!config.endpoints[endpointId]) return; // not one of this server's endpoints
    const failure: StartFailure = {
      message: startErrorMessage({ ...exit, permanent }),
      at: clock.now(),
      workerId,
      ...(exit.code !== undefined ? { exitCode: exit.code } : {}),
      ...(exit.signal ? { signal: exit.signal } : {}),
      output: exit.output,
      permanent,
      retryAfterS: Math.max(1, Math.ceil(retryInMs / 1000)),
    };
    metrics?.startFailed(endpointId);
    let run: StartFailureRun;
    try {
      run = await store.addStartFailure(endpointId, failure);
    } catch (err) {
      log.error(`worker failed to start, and the store did not record it: ${failure.message}`, {
        endpointId,
        workerId,
        error: String(err),
      });
      return;
    }
    this.#runs.set(endpointId, run);
    this.#again = true;
    log.warn(`worker failed to start: ${failure.message}`, {
      endpointId,
      workerId,
      attempts: run.attempts,
      code: exit.code,
      signal: exit.signal,
      retryInMs,
      permanent,
    });
    if (this.#refusing(endpointId, run)) await this.#failQueued(endpointId, workerId, run);
  }

  /**
   * A worker that connects itself reported that it cannot start (ping ?status=start_failed&reason=).
   * Workers this server's scaler starts are judged by their exit instead (it keeps their error
   * output); an endpoint with a handler and the external provider counts the reports.
   */
  async reported(endpointId: string, workerId: string, reason: string, permanent = false): Promise<void> {
    const endpoint = this.#deps.config.endpoints[endpointId];
    if (!endpoint || startsWorkers(this.#deps.config, endpoint)) return;
    await this.failed(endpointId, workerId, { output: reason.slice(-4000) }, REPORTED_RETRY_MS, permanent);
  }

  /** A worker of the endpoint reached the server: it starts, so everything is as before. */
  ready(endpointId: string): void {
    if (!this.#runs.delete(endpointId)) return;
    this.#deps.log.info("a worker started again; the endpoint takes jobs", { endpointId });
    this.#ending.add(endpointId);
    void this.#deps.store
      .endStartFailures(endpointId)
      .catch((err) => this.#deps.log.warn("could not record that a worker started", { endpointId, error: String(err) }))
      .finally(() => {
        this.#ending.delete(endpointId);
        void this.refresh();
      });
  }

  /** The endpoint's failed starts in a row and the last one's error (undefined while workers start). */
  report(endpointId: string): { failing: number; lastStartError: StartErrorReport } | undefined {
    const run = this.#runs.get(endpointId);
    const endpoint = this.#deps.config.endpoints[endpointId];
    if (!run || !endpoint) return undefined;
    const { last } = run;
    return {
      failing: run.attempts,
      lastStartError: {
        message: last.message,
        at: new Date(last.at).toISOString(),
        attempts: run.attempts,
        ...(last.exitCode !== undefined ? { exitCode: last.exitCode } : {}),
        ...(last.signal ? { signal: last.signal } : {}),
        permanent: run.permanent,
        refusing: this.#refusing(endpointId, run),
        onStartFailure: endpoint.onStartFailure,
      },
    };
  }

  /** Whether the endpoint's workers keep failing to start: the scaler keeps trying even with nothing queued. */
  retrying(endpointId: string): boolean {
    const run = this.#runs.get(endpointId);
    return run !== undefined && this.#refusing(endpointId, run);
  }

  /** What a submission to the endpoint is refused with while it refuses work; undefined otherwise. */
  refusal(endpointId: string): RefusedError | undefined {
    const run = this.#runs.get(endpointId);
    if (!run || !this.#refusing(endpointId, run)) return undefined;
    return new RefusedError(
      "not-starting",
      `no worker of ${endpointId} can start (${failedStarts(run.attempts)}): ${run.last.message}`,
      run.last.retryAfterS,
    );
  }

  /** The run refuses work: the first permanent failure, or the limit over the window; never with "queue". */
  #refusing(endpointId: string, run: StartFailureRun): boolean {
    const endpoint = this.#deps.config.endpoints[endpointId];
    if (endpoint?.onStartFailure !== "fail") return false;
    return run.permanent || (run.attempts >= endpoint.startFailureLimit && run.last.at - run.firstAt >= endpoint.startFailureWindowMs);
  }

  async #failQueued(endpointId: string, workerId: string, run: StartFailureRun): Promise<void> {
    const { store, clock, jobEvents, log } = this.#deps;
    const error = JSON.stringify({
      error_type: WORKER_START_ERROR_TYPE,
      error_message: `no worker of ${endpointId} could start (${failedStarts(run.attempts)}): ${run.last.message}`,
      error_traceback: run.last.output,
      hostname: hostname(),
      worker_id: workerId,
      runpod_version: "spool",
    });
    try {
      let failed = 0;
      for (;;) {
        const ended = await store.failQueued(endpointId, error, clock.now(), FAIL_BATCH);
        for (const job of ended) jobEvents.emit({ type: "ended", job });
        failed += ended.length;
        if (ended.length < FAIL_BATCH) break;
      }
      if (failed) log.warn("failed the queued jobs of an endpoint whose workers cannot start", { endpointId, jobs: failed });
    } catch (err) {
      log.error("could not fail the queued jobs of an endpoint whose workers cannot start", { endpointId, error: String(err) });
    }
  }
}

const failedStarts = (n: number) => `${n} failed start${n === 1 ? "" : "s"}`;
