import type { JobStatus } from "../../protocol/limits.ts";
import type { Log } from "../../log.ts";
import { HttpError, httpErrors, jsonAnswer, requestIdOf } from "../http/http-error.ts";
import type { StoredJob } from "../store/store.ts";
import type { OpenaiErrorBody } from "../../protocol/openai-wire.ts";
import { WORKER_START_ERROR_TYPE } from "../../protocol/job-response.ts";

/** An error in OpenAI's body shape; `param` names the request field at fault. */
export class OpenaiError extends HttpError {
  constructor(
    status: ConstructorParameters<typeof HttpError>[0],
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(status, message);
  }
}

/** OpenAI's error body: {error: {message, type, param, code}}. */
export function errorBody(status: number, message: string, param: string | null = null, code: string | null = null): OpenaiErrorBody {
  const type =
    status === 429
      ? "rate_limit_error"
      : status >= 500
        ? "server_error"
        : status === 401
          ? "authentication_error"
          : "invalid_request_error";
  const defaultCode =
    new Map([
      [401, "invalid_api_key"],
      [404, "not_found"],
      [413, "request_too_large"],
      [429, "rate_limit_exceeded"],
    ]).get(status) ?? null;
  return { error: { message, type, param, code: code ?? defaultCode } };
}

/** Whether a request's path is the OpenAI-compatible interface's, whose errors take OpenAI's shape. */
export const isOpenaiPath = (path: string) => /^\/v2\/[^/]+\/(openai|compat)\/v1(\/|$)/.test(path);

/**
 * The answer to an error of an OpenAI-compatible request, thrown by its route or by the app's
 * access step: OpenAI's body shape with the error's status and headers, or, for an unexpected
 * error (logged with the request id), a 500 that names the request id.
 */
export function openaiErrorAnswer(log: Log): (err: unknown, req: Request) => Response {
  const asHttpError = httpErrors(log);
  return (err, req) => {
    if (err instanceof OpenaiError) return jsonAnswer(errorBody(err.status, err.message, err.param, err.code), err.status);
    const known = asHttpError(err);
    if (known) return jsonAnswer(errorBody(known.status, known.message), known.status, known.headers);
    const requestId = requestIdOf(req);
    log.error("unexpected error", { requestId, path: new URL(req.url).pathname, error: String(err), stack: (err as Error).stack });
    return jsonAnswer(errorBody(500, `internal server error (request id ${requestId})`), 500);
  };
}

/** How a job that did not complete is told to the client. */
export function jobFailure(job: StoredJob | null): OpenaiError {
  if (!job) return new OpenaiError(500, "the job is gone (expired or purged) before it finished");
  if (job.status === "TIMED_OUT") return new OpenaiError(504, "the job ran past its execution timeout", null, "timeout");
  if (job.status === "CANCELLED") return new OpenaiError(500, "the job was cancelled", null, "cancelled");
  let message = typeof job.error === "string" ? job.error : JSON.stringify(job.error ?? "the job failed");
  let type = "";
  try {
    const shape = JSON.parse(message) as { error_type?: unknown; error_message?: unknown };
    if (typeof shape.error_message === "string") message = shape.error_message;
    if (typeof shape.error_type === "string") type = shape.error_type;
  } catch {
    // A plain-text error (a worker's input check, a generator's failure) is shown as it is.
  }
  if (type === WORKER_START_ERROR_TYPE) return new OpenaiError(503, message, null, "worker_start_failed");
  const invalid = type === "invalid_request_error" || message.startsWith("Invalid parameter:");
  return new OpenaiError(invalid ? 400 : 500, message);
}

/**
 * A request that waited its endpoint's openaiWaitMs for a job that was then cancelled: 503 when
 * no worker took it, 504 when one held it too long. OpenAI clients retry both.
 */
export function notInTime(status: JobStatus, waitMs: number, streaming: boolean): OpenaiError {
  const within = `within ${Math.round(waitMs / 100) / 10} s (the endpoint's openaiWaitMs)`;
  if (status === "IN_QUEUE")
    return new OpenaiError(503, `no worker took the request ${within}; it was cancelled, retry later`, null, "no_worker");
  const what = streaming ? "the worker sent no token" : "the request did not finish";
  return new OpenaiError(504, `${what} ${within}; it was cancelled`, null, "timeout");
}
