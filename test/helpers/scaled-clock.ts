import type { Clock } from "../../runtime/clock.ts";

/** The longest delay setTimeout takes; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A clock that runs `factor` times faster than the wall clock, for tests that drive many
 * requests through waits the client chooses (a /runsync wait of 90 s passes in 9 ms at 10,000x):
 * nothing waits for real time, and nothing needs to know which wait is pending.
 */
export class ScaledClock implements Clock {
  readonly #origin = Date.now();
  readonly #start: number;

  constructor(
    readonly factor: number,
    start = Date.now(),
  ) {
    this.#start = start;
  }

  now(): number {
    return Math.floor(this.#start + (Date.now() - this.#origin) * this.factor);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, Math.min(MAX_TIMER_MS, Math.ceil(ms / this.factor)));
      signal?.addEventListener("abort", done, { once: true });
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      }
    });
  }
}
