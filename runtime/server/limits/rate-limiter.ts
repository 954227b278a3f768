import type { RateLimits } from "../../config/config.ts";
import type { RateLimitedOperation } from "../../protocol/limits.ts";
import type { Admission, RequestLimit, Store } from "../store/store.ts";

/**
 * Admits one request of `op` on an endpoint against its limits, counted in the store (so every
 * server sharing the store counts together). A refusal carries the message for the 429.
 */
export async function admitRequest(
  store: Store,
  endpointId: string,
  op: RateLimitedOperation,
  limits: RateLimits,
  windowMs: number,
  now: number,
): Promise<{ ok: true; release: () => Promise<void> } | { ok: false; retryAfterSeconds: number; reason: string }> {
  const limit = Object.hasOwn(limits, op) ? limits[op] : undefined;
  if (!limit) throw new Error(`no rate limit configured for ${op}`);
  const admission = await store.admitRequest(`${endpointId}:${op}`, limit, windowMs, now);
  if (admission.ok) return admission;
  const reason =
    admission.why === "window"
      ? `rate limit: at most ${limit.requests} ${op} requests per ${windowMs / 1000} s on this endpoint`
      : `rate limit: at most ${limit.concurrent} concurrent ${op} requests on this endpoint`;
  return { ok: false, retryAfterSeconds: admission.retryAfterSeconds, reason };
}

/**
 * In-memory request counting for a store that one server owns: fixed windows of `windowMs`
 * aligned to the clock, plus a count of requests in flight.
 */
export class LocalRequestCounter {
  readonly #windows = new Map<string, { start: number; count: number }>();
  readonly #inFlight = new Map<string, number>();

  admit(bucket: string, limit: RequestLimit, windowMs: number, now: number): Admission {
    const start = now - (now % windowMs);
    let window = this.#windows.get(bucket);
    if (!window || window.start !== start) this.#windows.set(bucket, (window = { start, count: 0 }));
    if (window.count >= limit.requests) {
      return { ok: false, why: "window", retryAfterSeconds: Math.max(1, Math.ceil((start + windowMs - now) / 1000)) };
    }
    const inFlight = this.#inFlight.get(bucket) ?? 0;
    if (limit.concurrent !== undefined && inFlight >= limit.concurrent) return { ok: false, why: "concurrent", retryAfterSeconds: 1 };
    window.count++;
    this.#inFlight.set(bucket, inFlight + 1);
    let released = false;
    return {
      ok: true,
      release: async () => {
        if (released) return;
        released = true;
        const n = (this.#inFlight.get(bucket) ?? 1) - 1;
        if (n > 0) this.#inFlight.set(bucket, n);
        else this.#inFlight.delete(bucket);
      },
    };
  }
}
