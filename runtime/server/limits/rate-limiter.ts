import type { RateLimits } from "../../config/config.ts";
import type { RateLimitedOperation } from "../../protocol/limits.ts";
import { andThen, type MaybePromise } from "../../maybe-promise.ts";
import type { Store } from "../store/store.ts";

/**
 * Admits one request of `op` on an endpoint against its limits, counted in the store (so every
 * server sharing the store counts together). A refusal carries the message for the 429.
 */
export function admitRequest(
  store: Store,
  endpointId: string,
  op: RateLimitedOperation,
  limits: RateLimits,
  windowMs: number,
  now: number,
): MaybePromise<{ ok: true; release: () => MaybePromise<void> } | { ok: false; retryAfterSeconds: number; reason: string }> {
  const limit = Object.hasOwn(limits, op) ? limits[op] : undefined;
  if (!limit) throw new Error(`no rate limit configured for ${op}`);
  return andThen(store.admitRequest(`${endpointId}:${op}`, limit, windowMs, now), (admission) => {
    if (admission.ok) return admission;
    const reason =
      admission.why === "window"
        ? `rate limit: at most ${limit.requests} ${op} requests per ${windowMs / 1000} s on this endpoint`
        : `rate limit: at most ${limit.concurrent} concurrent ${op} requests on this endpoint`;
    return { ok: false as const, retryAfterSeconds: admission.retryAfterSeconds, reason };
  });
}
