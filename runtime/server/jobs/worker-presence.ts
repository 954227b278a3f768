import { boundToAnotherWorker } from "../keys/worker-keys.ts";
import type { Store, WorkerReport, WorkerTouch } from "../store/store.ts";
import { RefusedError } from "./refused.ts";

/** Liveness is judged in tens of seconds, so one write per worker per second is plenty. */
const MIN_TOUCH_INTERVAL_MS = 1_000;

/** The last write this server made for a worker, and for whom the store accepted it. */
interface Written {
  at: number;
  endpointId: string;
  keyId: string;
}

/** For a request that names a job: a worker not known yet cannot hold one, and is not recorded. */
export const KNOWN_ONLY: WorkerReport = Object.freeze({ knownOnly: true });

/** A worker id another endpoint or key owns: answered as if it did not exist. */
export const workerNotFound = (workerId: string) => new RefusedError("worker-not-found", `worker ${workerId} not found`);

/**
 * Records that workers are alive without a store write on every request: a worker's take,
 * done, stream and stop-poll each count, but only the first in a second is written. Pings,
 * which carry a report, are always written. A worker id belongs to the endpoint and key that
 * first used it: a request of another is refused (404) by the store, and never skips the write.
 */
export class WorkerPresence {
  readonly #lastWrite = new Map<string, Written>();

  constructor(
    private readonly store: Store,
    /** Told of every request of a worker (this server's scaler). */
    private readonly told?: { reached(workerId: string, endpointId: string): void },
  ) {}

  /**
   * Records the worker as seen: the promise of the store write (rejected with a 404 when the id is
   * another's), or undefined when none is due.
   */
  touch(workerId: string, endpointId: string, keyId: string, now: number, report?: WorkerReport): Promise<WorkerTouch> | undefined {
    // A key the server gave one of its workers acts for that worker alone.
    if (boundToAnotherWorker(keyId, workerId)) return Promise.reject(workerNotFound(workerId));
    const last = this.#lastWrite.get(workerId);
    const ping = report !== undefined && (report.runningIds !== undefined || report.unhealthy !== undefined);
    if (
      !ping &&
      last !== undefined &&
      now - last.at < MIN_TOUCH_INTERVAL_MS &&
      now >= last.at &&
      last.endpointId === endpointId &&
      last.keyId === keyId
    ) {
      this.told?.reached(workerId, endpointId);
      return undefined;
    }
    return this.store.touchWorker(workerId, endpointId, keyId, now, report).then((touched) => {
      if (!touched) throw workerNotFound(workerId);
      this.told?.reached(workerId, endpointId);
      this.#lastWrite.set(workerId, { at: now, endpointId, keyId });
      if (this.#lastWrite.size > 100_000) this.#lastWrite.clear(); // bound memory on id churn
      return touched;
    });
  }
}
