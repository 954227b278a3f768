import { hostname } from "node:os";
import type { Clock } from "../../clock.ts";
import { startsWorkers, type Config } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import { WORKER_START_ERROR_TYPE, type StartErrorReport } from "../../protocol/job-response.ts";
import { HttpError } from "../http/http-error.ts";
import type { JobEvents } from "../jobs/job-events.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import type { Store } from "../store/store.ts";

/** How a worker that never became ready ended: its exit code or signal and its last error output. */
export interface StartExit {
  code?: number;
  signal?: string;
  /** The last lines it wrote to stderr (or the reason it reported itself). */
  output: string;
}

interface Failing {
  attempts: number;
  last: StartErrorReport;
  /** The whole error output, for the failed jobs' traceback. */
  output: string;
  retryAfterS: number;
}

export interface StartFailuresDeps {
  config: Config;
  clock: Clock;
  log: Log;
  store: Store;
  jobEvents: JobEvents;
  metrics?: ServerMetrics;
}

/** Retry-After for an endpoint whose outside workers report start failures: when one may have been restarted. */
const REPORTED_RETRY_MS = 10_000;
/** Queued jobs failed a store call: a long queue never holds the store (Redis: every server) in one step. */
const FAIL_BATCH = 500;

/**
 * Workers that exit before they are ready, per endpoint: consecutive failed starts since a
 * worker last reached the server. Once `startFailureLimit` is reached on an endpoint with
 * onStartFailure "fail", its queued jobs end FAILED naming the error and new submissions are
 * refused with 503 until a worker is ready again; with "queue" they keep waiting.
 */
export class StartFailures {
  readonly #deps: StartFailuresDeps;
  readonly #failing = new Map<string, Failing>();

  constructor(deps: StartFailuresDeps) {
    this.#deps = deps;
  }

  /** A worker of the endpoint ended before it was ready; `retryInMs` is when the next start is tried. */
  async failed(endpointId: string, workerId: string, exit: StartExit, retryInMs: number): Promise<void> {
    const { clock, log, metrics, config } = this.#deps;
    const endpoint = config.endpoints[endpointId];
    if (!endpoint) return; // not one of this server's endpoints
    const message = startErrorMessage(exit);
    const attempts = (this.#failing.get(endpointId)?.attempts ?? 0) + 1;
    const refusing = attempts >= endpoint.startFailureLimit && endpoint.onStartFailure === "fail";
    const last: StartErrorReport = {
      message,
      at: new Date(clock.now()).toISOString(),
      attempts,
      ...(exit.code !== undefined ? { exitCode: exit.code } : {}),
      ...(exit.signal ? { signal: exit.signal } : {}),
      refusing,
      onStartFailure: endpoint.onStartFailure,
    };
    this.#failing.set(endpointId, { attempts, last, output: exit.output, retryAfterS: Math.max(1, Math.ceil(retryInMs / 1000)) });
    metrics?.startFailed(endpointId);
    log.warn(`worker failed to start: ${message}`, { endpointId, workerId, attempts, code: exit.code, signal: exit.signal, retryInMs });
    if (refusing) await this.#failQueued(endpointId, workerId);
  }

  /**
   * A worker that connects itself reported that it cannot start (ping ?status=start_failed&reason=).
   * Workers this server's scaler starts are judged by their exit instead (it keeps their error
   * output); an endpoint with a handler and the external provider counts the reports.
   */
  async reported(endpointId: string, workerId: string, reason: string): Promise<void> {
    const endpoint = this.#deps.config.endpoints[endpointId];
    if (!endpoint || startsWorkers(this.#deps.config, endpoint)) return;
    await this.failed(endpointId, workerId, { output: reason.slice(-4000) }, REPORTED_RETRY_MS);
  }

  /** A worker of the endpoint reached the server: it starts, so everything is as before. */
  ready(endpointId: string): void {
    if (!this.#failing.delete(endpointId)) return;
    this.#deps.log.info("a worker started again; the endpoint takes jobs", { endpointId });
  }

  /** Consecutive failed starts of the endpoint and the last one's error (undefined while workers start). */
  report(endpointId: string): { failing: number; lastStartError: StartErrorReport } | undefined {
    const f = this.#failing.get(endpointId);
    return f && { failing: f.attempts, lastStartError: f.last };
  }

  /** Whether the endpoint's workers keep failing to start: the scaler keeps trying even with nothing queued. */
  retrying(endpointId: string): boolean {
    return this.#failing.get(endpointId)?.last.refusing === true;
  }

  /** The 503 a submission to the endpoint gets while it refuses work; undefined otherwise. */
  refusal(endpointId: string): HttpError | undefined {
    const f = this.#failing.get(endpointId);
    if (!f?.last.refusing) return undefined;
    return new HttpError(
      503,
      `no worker of ${endpointId} can start (${f.attempts} failed starts): ${f.last.message}`,
      { "retry-after": String(f.retryAfterS) },
    );
  }

  async #failQueued(endpointId: string, workerId: string): Promise<void> {
    const { store, clock, jobEvents, log } = this.#deps;
    const f = this.#failing.get(endpointId)!;
    const error = JSON.stringify({
      error_type: WORKER_START_ERROR_TYPE,
      error_message: `no worker of ${endpointId} could start (${f.attempts} failed starts): ${f.last.message}`,
      error_traceback: f.output,
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

/** One line that says why: the last error line of its output, with how it ended. */
export function startErrorMessage(exit: StartExit): string {
  const lines = exit.output.split("\n").map((l) => l.trim()).filter((l) => l && !/^at\s/.test(l) && !/^\d+ \|/.test(l));
  const line = lines.findLast((l) => /error|not found|cannot|failed|denied|killed|memory/i.test(l)) ?? lines.at(-1);
  if (exit.code === undefined && !exit.signal) return line ?? "the worker reported that it cannot start";
  const how = exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
  return line ? `${line} (${how} before it was ready)` : `the worker ${how} before it was ready`;
}
