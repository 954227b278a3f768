import type { RateLimitedOperation } from "../../protocol/limits.ts";
import type { RateLimits } from "../../config/config.ts";

export type Admission = { ok: true; release: () => void } | { ok: false; retryAfterSeconds: number; reason: string };

/** Counts requests per endpoint and operation; one server's view (a shared store can back it). */
export interface RateLimiter {
  admit(endpointId: string, op: RateLimitedOperation, limits: RateLimits, now: number): Admission;
}

/**
 * Fixed windows of `windowMs` aligned to the clock, plus a count of requests in flight. A request
 * refused for either reason is not counted.
 */
export class LocalRateLimiter implements RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();
  readonly #inFlight = new Map<string, number>();

  constructor(private readonly windowMs: number) {}

  admit(endpointId: string, op: RateLimitedOperation, limits: RateLimits, now: number): Admission {
    const limit = limits[op];
    const key = `${endpointId}\n${op}`;
    const start = now - (now % this.windowMs);
    let window = this.#windows.get(key);
    if (!window || window.start !== start) this.#windows.set(key, (window = { start, count: 0 }));
    if (window.count >= limit.requests) {
      return {
        ok: false,
        retryAfterSeconds: Math.max(1, Math.ceil((start + this.windowMs - now) / 1000)),
        reason: `rate limit: at most ${limit.requests} ${op} requests per ${this.windowMs / 1000} s on this endpoint`,
      };
    }
    const inFlight = this.#inFlight.get(key) ?? 0;
    if (limit.concurrent !== undefined && inFlight >= limit.concurrent) {
      return { ok: false, retryAfterSeconds: 1, reason: `rate limit: at most ${limit.concurrent} concurrent ${op} requests on this endpoint` };
    }
    window.count++;
    this.#inFlight.set(key, inFlight + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        const n = (this.#inFlight.get(key) ?? 1) - 1;
        if (n > 0) this.#inFlight.set(key, n);
        else this.#inFlight.delete(key);
      },
    };
  }
}
