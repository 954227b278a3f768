import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Log } from "../../log.ts";
import { RefusedError, type RefusalReason } from "../jobs/refused.ts";
import { StoreUnavailableError } from "../store/store.ts";

/** A store outage is logged at most this often (each request meanwhile answers 503). */
const OUTAGE_LOG_MS = 10_000;

/**
 * The one error type routes throw; onError answers it as {"error": message} with its status.
 * It is an answer, not a fault: it carries no stack, which would cost every refused request.
 */
export class HttpError extends Error {
  override name = "HttpError";
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

/** The status each refusal of the job service is answered with. */
const REFUSAL_STATUS: Record<RefusalReason, ContentfulStatusCode> = {
  "endpoint-not-found": 404,
  "worker-not-found": 404,
  invalid: 400,
  "queue-full": 429,
  "not-starting": 503,
  "idempotency-conflict": 422,
  "idempotency-gone": 409,
};

/** The 404 of a job id the endpoint does not have (any more). */
export const jobNotFound = (id: string) => new HttpError(404, `job ${id} not found (unknown, purged or expired)`);

/** The request's id for the log: the client's X-Request-Id (up to 128 characters), or a new one. */
export function requestIdOf(req: Request): string {
  return req.headers.get("x-request-id")?.slice(0, 128) || crypto.randomUUID();
}

/** A JSON answer as Hono's c.json writes it. */
export const jsonAnswer = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

/**
 * The answer to an error a /v2 route threw: {"error": message} with its status and headers, or,
 * for an unexpected error (logged with the request id), a 500 that names the request id.
 */
export function errorAnswer(log: Log): (err: unknown, req: Request) => Response {
  const asHttpError = httpErrors(log);
  return (err, req) => {
    const known = asHttpError(err);
    if (known) return jsonAnswer({ error: known.message }, known.status, known.headers);
    const requestId = requestIdOf(req);
    log.error("unexpected error", {
      requestId,
      method: req.method,
      path: new URL(req.url).pathname,
      error: String(err),
      stack: (err as Error).stack,
    });
    return jsonAnswer({ error: `internal server error (request id ${requestId})` }, 500);
  };
}

/**
 * `err` as the HttpError it is answered with, if it has one: the one place where a refusal of the
 * job service becomes a status. A store that did not answer is a 503, and a warning in the log
 * (one per outage and every 10 s while it lasts).
 */
export function httpErrors(log: Log): (err: unknown) => HttpError | undefined {
  let answer = answers.get(log);
  if (!answer) answers.set(log, (answer = outageAware(log)));
  return answer;
}

/** One per log, so that the app's and the OpenAI routes' error handlers share the throttle. */
const answers = new WeakMap<Log, (err: unknown) => HttpError | undefined>();

function outageAware(log: Log): (err: unknown) => HttpError | undefined {
  let loggedAt = -Infinity;
  return (err) => {
    if (err instanceof HttpError) return err;
    if (err instanceof RefusedError)
      return new HttpError(
        REFUSAL_STATUS[err.reason],
        err.message,
        err.retryAfterS === undefined ? {} : { "retry-after": String(err.retryAfterS) },
      );
    if (!(err instanceof StoreUnavailableError)) return undefined;
    const now = performance.now();
    if (now - loggedAt >= OUTAGE_LOG_MS) {
      loggedAt = now;
      log.warn("store unavailable: requests answer 503", { error: err.message });
    }
    return new HttpError(503, `store unavailable: ${err.message}; retry later`, { "retry-after": "1" });
  };
}
