import { Hono, type Context } from "hono";
import type { z } from "zod";
import { describeIssues } from "../../protocol/job-request.ts";
import { isFinal, LIMITS } from "../../protocol/limits.ts";
import { authenticate, authorize } from "../access.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { HttpError } from "../http-error.ts";
import { limitBody, readJson } from "../request-input.ts";
import type { StoredJob } from "../store/store.ts";

/** The issue's name and the spec's name for the same interface. */
const BASE = "/:endpoint/:iface{openai|compat}/v1";

/** Route -> the openai_route its jobs carry (worker-vllm's convention). */
const ROUTES = { chat: "/v1/chat/completions", completions: "/v1/completions", models: "/v1/models" } as const;

/** An error in OpenAI's body shape; `param` names the request field at fault. */
class OpenaiError extends HttpError {
  constructor(status: ConstructorParameters<typeof HttpError>[0], message: string, readonly param: string | null = null, readonly code: string | null = null) {
    super(status, message);
  }
}

function errorBody(status: number, message: string, param: string | null = null, code: string | null = null) {
  const type = status === 429 ? "rate_limit_error" : status >= 500 ? "server_error" : status === 401 ? "authentication_error" : "invalid_request_error";
  const defaultCode = { 401: "invalid_api_key", 404: "not_found", 413: "request_too_large", 429: "rate_limit_exceeded" }[status] ?? null;
  return { error: { message, type, param, code: code ?? defaultCode } };
}

/** How a job that did not complete is told to the client. */
function jobFailure(job: StoredJob | null): OpenaiError {
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
  const invalid = type === "invalid_request_error" || message.startsWith("Invalid parameter:");
  return new OpenaiError(invalid ? 400 : 500, message);
}

/** A job's output or chunk as the client sees it: without `cost`, which the server has charged. */
function withoutCost(value: unknown): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("cost" in value)) return value;
  const { cost: _cost, ...rest } = value as Record<string, unknown>;
  return rest;
}

/** SSE text of stream chunks: objects as `data: JSON`; strings (pre-formatted SSE) as they are. */
function sse(chunks: unknown[]): string {
  let out = "";
  for (const chunk of chunks.flat()) {
    if (typeof chunk === "string") out += chunk.endsWith("\n\n") ? chunk : `${chunk.replace(/\n*$/, "")}\n\n`;
    else out += `data: ${JSON.stringify(withoutCost(chunk))}\n\n`;
  }
  return out;
}

/**
 * The OpenAI-compatible interface of an endpoint, at /v2/<endpoint>/openai/v1 and /compat/v1:
 * POST chat/completions and completions (JSON, or SSE with stream: true), GET models. Each
 * request is a job {openai_route, openai_input} in the endpoint's queue, so keys, rate limits
 * and scaling apply; the route waits for it and relays its output or its chunks. Errors use
 * OpenAI's body shape, including those of authentication and limits.
 */
export function openaiRoutes(deps: RouteDeps): Hono<AppEnv> {
  const { jobs } = deps;
  const app = new Hono<AppEnv>();

  app.onError((err, c) => {
    if (err instanceof OpenaiError) return c.json(errorBody(err.status, err.message, err.param, err.code), err.status);
    if (err instanceof HttpError) return c.json(errorBody(err.status, err.message), err.status, err.headers);
    const requestId = c.get("requestId");
    deps.log.error("unexpected error", { requestId, path: new URL(c.req.url).pathname, error: String(err), stack: (err as Error).stack });
    return c.json(errorBody(500, `internal server error (request id ${requestId})`), 500);
  });

  app.use(`${BASE}/*`, authenticate(deps));
  app.use(`${BASE}/*`, authorize(deps));
  // Endpoints whose handler the server can read must take the OpenAI form of input; endpoints
  // served by outside workers (worker-vllm) are trusted to.
  app.use(`${BASE}/*`, async (c, next) => {
    const schema = await deps.inputSchemas?.get(c.var.endpointId);
    if (schema && !schema.safeParse({ openai_route: ROUTES.models }).success) {
      throw new OpenaiError(404, `endpoint ${c.var.endpointId} does not serve the OpenAI-compatible interface (its handler takes no openai_route input)`);
    }
    await next();
  });

  /** The OpenAI form of an input-schema failure: the field at fault as `param`, without openai_input. */
  function invalid(error: z.ZodError): OpenaiError {
    const strip = (path: PropertyKey[]) => (path[0] === "openai_input" ? path.slice(1) : path);
    const path = strip(error.issues[0]!.path);
    const issues = error.issues.map((i) => ({ ...i, path: strip(i.path) }));
    return new OpenaiError(400, `Invalid parameter: ${describeIssues({ issues } as z.ZodError)}`, path.length ? path.join(".") : null);
  }

  function enqueue(c: Context<AppEnv>, input: Record<string, unknown>): Promise<StoredJob> {
    return jobs.submit(c.var.endpointId, { input }, { keyId: c.var.key.id, sync: true, invalid });
  }

  /** Stops a job whose client went away, so that no worker keeps generating for nobody. */
  const abandon = (job: StoredJob) => void jobs.cancel(job.endpointId, job.id).catch(() => {});

  /** Waits for the job's final state; null when the client went away first. */
  async function settle(job: StoredJob, signal: AbortSignal): Promise<{ job: StoredJob | null } | null> {
    for (;;) {
      const now = await jobs.waitForFinal(job.endpointId, job.id, job.policy.ttl, signal);
      if (!now || isFinal(now.status)) return { job: now };
      if (signal.aborted) return null;
    }
  }

  /** Waits for chunks not yet relayed, or the final state; null when the client went away. */
  async function nextChunks(job: StoredJob, signal: AbortSignal): Promise<{ chunks: unknown[]; job: StoredJob | null } | null> {
    for (;;) {
      const r = await jobs.readStream(job.endpointId, job.id, job.policy.ttl, signal);
      if (r && (r.chunks.length > 0 || isFinal(r.job.status))) return { chunks: r.chunks, job: r.job };
      if (signal.aborted) return null;
      if (!r) return { chunks: [], job: null };
    }
  }

  async function relay(c: Context<AppEnv>, openaiRoute: string, body?: Record<string, unknown>): Promise<Response> {
    const signal = c.req.raw.signal;
    const job = await enqueue(c, body === undefined ? { openai_route: openaiRoute } : { openai_route: openaiRoute, openai_input: body });
    if (!body?.stream) {
      const done = await settle(job, signal);
      if (!done) {
        abandon(job);
        return c.body(null, 499 as never);
      }
      if (done.job?.status !== "COMPLETED") throw jobFailure(done.job);
      const output = done.job.output;
      return c.json(withoutCost(Array.isArray(output) ? output[0] : output) as object);
    }

    // The first chunks (or the end) come before the status line, so a job that fails at once
    // is an HTTP error rather than a broken stream.
    const first = await nextChunks(job, signal);
    if (!first) {
      abandon(job);
      return c.body(null, 499 as never);
    }
    if (first.chunks.length === 0 && first.job?.status !== "COMPLETED") throw jobFailure(first.job);
    const encoder = new TextEncoder();
    const gone = new AbortController();
    // The stream counts as a request in flight (the concurrent rate limit) until it ends.
    const release = c.var.keepAdmission?.() ?? (async () => {});
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        let read: Awaited<ReturnType<typeof nextChunks>> = first;
        try {
          while (read) {
            if (read.chunks.length) controller.enqueue(encoder.encode(sse(read.chunks)));
            if (!read.job || isFinal(read.job.status)) break;
            read = await nextChunks(job, gone.signal);
          }
          if (!read) return;
          if (read.job?.status === "COMPLETED") controller.enqueue(encoder.encode("data: [DONE]\n\n"));
          else {
            const err = jobFailure(read.job);
            controller.enqueue(encoder.encode(`data: ${JSON.stringify(errorBody(err.status, err.message, err.param, err.code))}\n\n`));
          }
          controller.close();
        } catch (err) {
          if (!gone.signal.aborted) controller.error(err);
        } finally {
          await release();
        }
      },
      cancel() {
        gone.abort();
        abandon(job);
        void release();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" } });
  }

  async function requestBody(c: Context<AppEnv>): Promise<Record<string, unknown>> {
    const body = await readJson(c.req.raw);
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw new OpenaiError(400, "the request body must be a JSON object");
    return body as Record<string, unknown>;
  }

  app.post(`${BASE}/chat/completions`, limitBody(LIMITS.runsyncBodyBytes), async (c) => relay(c, ROUTES.chat, await requestBody(c)));
  app.post(`${BASE}/completions`, limitBody(LIMITS.runsyncBodyBytes), async (c) => relay(c, ROUTES.completions, await requestBody(c)));
  app.get(`${BASE}/models`, (c) => relay(c, ROUTES.models));
  app.all(`${BASE}/*`, (c) => {
    throw new OpenaiError(404, `no route for ${c.req.method} ${new URL(c.req.url).pathname}; this interface has POST chat/completions, POST completions and GET models`);
  });

  return app;
}
