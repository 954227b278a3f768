/** Time source for everything with timers: retention, TTL, heartbeats, long-polls. */
export interface Clock {
  now(): number;
  /** Resolves after `ms` (or at once when `signal` aborts). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The wall clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      }
    }),
};

interface Sleeper {
  at: number;
  resolve: () => void;
}

/** A clock that only moves when told to: tests drive time instead of waiting for it. */
export class ManualClock implements Clock {
  #now: number;
  #sleepers = new Set<Sleeper>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const sleeper: Sleeper = {
        at: this.#now + ms,
        resolve: () => {
          this.#sleepers.delete(sleeper);
          resolve();
        },
      };
      this.#sleepers.add(sleeper);
      signal?.addEventListener("abort", sleeper.resolve, { once: true });
    });
  }

  /** Moves time forward and wakes every sleeper that is now due. */
  advance(ms: number): void {
    this.#now += ms;
    for (const s of [...this.#sleepers]) if (s.at <= this.#now) s.resolve();
  }

  /** When each pending sleep falls due, earliest first: shows that a wait is still parked, and until when. */
  get dueTimes(): number[] {
    return [...this.#sleepers].map((s) => s.at).sort((a, b) => a - b);
  }

  /** How many sleeps are pending: lets a test wait until a long-poll is parked. */
  get sleeping(): number {
    return this.#sleepers.size;
  }
}
