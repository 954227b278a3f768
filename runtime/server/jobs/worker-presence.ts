import type { Store, WorkerReport } from "../store/store.ts";

/** Liveness is judged in tens of seconds, so one write per worker per second is plenty. */
const MIN_TOUCH_INTERVAL_MS = 1_000;

/**
 * Records that workers are alive without a store write on every request: a worker's take,
 * done, stream and stop-poll each count, but only the first in a second is written. Pings,
 * which carry a report, are always written.
 */
export class WorkerPresence {
  readonly #lastWrite = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly onSeen?: (workerId: string, endpointId: string) => void,
  ) {}

  /** Records the worker as seen: the promise of the store write, or undefined when none is due. */
  touch(workerId: string, endpointId: string, now: number, report?: WorkerReport): Promise<void> | undefined {
    this.onSeen?.(workerId, endpointId);
    const last = this.#lastWrite.get(workerId);
    if (!report && last !== undefined && now - last < MIN_TOUCH_INTERVAL_MS && now >= last) return undefined;
    this.#lastWrite.set(workerId, now);
    if (this.#lastWrite.size > 100_000) this.#lastWrite.clear(); // bound memory on id churn
    return this.store.touchWorker(workerId, endpointId, now, report);
  }
}
