/** Why the job service refused a request; http/http-error.ts gives each its status. */
export type RefusalReason =
  /** No such endpoint on this server. */
  | "endpoint-not-found"
  /** The worker id is unknown, or another endpoint's or key's. */
  | "worker-not-found"
  /** The request itself is wrong: its input, its s3Config host, its webhook address. */
  | "invalid"
  /** The endpoint's queue is at its backpressure limit. */
  | "queue-full"
  /** The endpoint's workers cannot start, so it takes no work. */
  | "not-starting"
  /** The Idempotency-Key names a live job submitted with another body. */
  | "idempotency-conflict"
  /** The Idempotency-Key names a job that is no longer kept. */
  | "idempotency-gone";

/**
 * The job service refused what it was asked, saying why in words a client can act on. It is an
 * answer, not a fault: it carries no stack, which would cost every refused request.
 */
export class RefusedError extends Error {
  override name = "RefusedError";
  constructor(
    readonly reason: RefusalReason,
    message: string,
    /** Seconds after which asking again may succeed. */
    readonly retryAfterS?: number,
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}
