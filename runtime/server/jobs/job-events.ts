import type { EndedJob, StoredJob } from "../store/store.ts";

/** What happened to a job on this server, for stats, metrics and the dashboard. */
export type JobEvent =
  | { type: "submitted"; job: StoredJob }
  | { type: "taken"; job: StoredJob; workerId: string }
  /** A final state reached on this server: completed, failed, cancelled, timed out, lost. */
  | { type: "ended"; job: EndedJob }
  | { type: "refused"; endpointId: string; reason: "backpressure" | "rate-limit" }
  /** A FAILED or TIMED_OUT job queued again by /retry (it will end again). */
  | { type: "retried"; job: StoredJob }
  /** Queued jobs removed by /purge-queue (they never end). */
  | { type: "purged"; endpointId: string; count: number };

type Listener = (e: JobEvent) => void;

/**
 * Job events of one server (with several servers on Redis each sees those of its own requests
 * and sweeps). Emitting with no listener is one length check; a listener that throws is
 * reported to `onError` and never fails the request that emitted.
 */
export class JobEvents {
  #listeners: Listener[] = [];
  readonly #onError: (err: unknown) => void;

  constructor(onError: (err: unknown) => void = () => {}) {
    this.#onError = onError;
  }

  /** Adds a listener; returns the function that removes it. */
  on(listener: Listener): () => void {
    this.#listeners = [...this.#listeners, listener];
    return () => {
      this.#listeners = this.#listeners.filter((l) => l !== listener);
    };
  }

  emit(e: JobEvent): void {
    const listeners = this.#listeners;
    for (let i = 0; i < listeners.length; i++) {
      try {
        listeners[i]!(e);
      } catch (err) {
        this.#onError(err);
      }
    }
  }

  /** Whether anyone listens: callers skip building an event nobody reads. */
  get listening(): boolean {
    return this.#listeners.length > 0;
  }
}
