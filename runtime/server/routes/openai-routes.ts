import { Hono, type Context, type MiddlewareHandler } from "hono";
import type { z } from "zod";
import { findEndpoint } from "../../config/config.ts";
import { describeIssues } from "../../protocol/job-request.ts";
import { isFinal, LIMITS } from "../../protocol/limits.ts";
import { chatCompletionRequestSchema, completionRequestSchema } from "../../protocol/openai-request.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { limitBody, originToRecord, readJson, traceparentOf } from "../http/request-input.ts";
import { eventStreamResponse } from "../http/event-stream.ts";
import type { StoredJob } from "../store/store.ts";
import { errorBody, jobFailure, notInTime, openaiErrorAnswer, OpenaiError } from "./openai-errors.ts";

/**
 * Two names for the same interface (openai and compat). Two static prefixes rather than one
 * `:iface{openai|compat}` pattern: Hono's RegExpRouter takes no pattern beside the static
 * segments of the other routes (status, run...), and one such route sends the whole app to its
 * slower TrieRouter.
 */
const BASES = ["/:endpoint/openai/v1", "/:endpoint/compat/v1"];

/** Route -> the openai_route its jobs carry (worker-vllm's convention). */
const ROUTES = { chat: "/v1/chat/completions", completions: "/v1/completions", models: "/v1/models" } as const;

/** A job's output or chunk as the client sees it: without `cost`, which the server has charged. */
function withoutCost(value: unknown): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("cost" in value)) return value;
  const { cost: _cost, ...rest } = value as Record<string, unknown>;
  return rest;
}

/** What a stream has read: chunks not yet relayed and the job (null once it is gone). */
interface Read {
  chunks: unknown[];
  job: StoredJob | null;
}

/** Whether a read brought something to relay or the end. */
const progressed = (r: Read) => r.chunks.length > 0 || !r.job || isFinal(r.job.status);

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
 * OpenAI's body shape, including those of the app's access step (see openaiErrorAnswer).
 */
export function openaiRoutes(deps: RouteDeps): Hono<AppEnv> {
  const { jobs } = deps;
  const app = new Hono<AppEnv>();

  const answerError = openaiErrorAnswer(deps.log);
  app.onError((err, c) => answerError(err, c.req.raw));

  // Endpoints whose handler the server can read must take the OpenAI form of input; endpoints
  // served by outside workers (worker-vllm) are trusted to.
  const servesOpenai: MiddlewareHandler<AppEnv> = async (c, next) => {
    const schema = await deps.inputSchemas?.get(c.get("endpointId"));
    if (schema && !schema.safeParse({ openai_route: ROUTES.models }).success) {
      throw new OpenaiError(
        404,
        `endpoint ${c.get("endpointId")} does not serve the OpenAI-compatible interface (its handler takes no openai_route input)`,
      );
    }
    await next();
  };
  for (const base of BASES) app.use(`${base}/*`, servesOpenai);

  /** The OpenAI form of an input-schema failure: the field at fault as `param`, without openai_input. */
  function invalid(error: z.ZodError): OpenaiError {
    const strip = (path: PropertyKey[]) => (path[0] === "openai_input" ? path.slice(1) : path);
    const path = strip(error.issues[0]!.path);
    const issues = error.issues.map((i) => ({ ...i, path: strip(i.path) }));
    return new OpenaiError(400, `Invalid parameter: ${describeIssues({ issues } as z.ZodError)}`, path.length ? path.join(".") : null);
  }

  function enqueue(c: Context<AppEnv>, input: Record<string, unknown>): Promise<StoredJob> {
    return jobs.submit(
      c.get("endpointId"),
      { input },
      {
        keyId: c.get("key").id,
        sync: true,
        invalid,
        origin: originToRecord(c.req.url, deps.scaler),
        traceparent: traceparentOf(c.req.raw.headers),
      },
    );
  }

  /** Stops a job whose client went away, so that no worker keeps generating for nobody. */
  const abandon = (job: StoredJob) => void jobs.cancel(job.endpointId, job.id).catch(() => {});

  /** Chunks not yet relayed and the job, after waiting up to `ms` for either; null when the client went away. */
  async function read(job: StoredJob, ms: number, signal: AbortSignal): Promise<Read | null> {
    const r = await jobs.readStream(job.endpointId, job.id, ms, signal);
    if (signal.aborted) return null;
    return r ? { chunks: r.chunks, job: r.job } : { chunks: [], job: null };
  }

  /**
   * The wait is over: cancels the job and returns the error to answer, or the job when it
   * reached a final state first (it is then answered as usual).
   */
  async function giveUp(job: StoredJob, last: StoredJob, waitMs: number, streaming: boolean): Promise<OpenaiError | StoredJob> {
    const now = await jobs.cancel(job.endpointId, job.id).catch(() => null);
    if (now && isFinal(now.status) && now.status !== "CANCELLED") return now;
    return notInTime(last.status, waitMs, streaming);
  }

  async function relay(c: Context<AppEnv>, openaiRoute: string, body?: Record<string, unknown>): Promise<Response> {
    const signal = c.req.raw.signal;
    const waitMs = findEndpoint(deps.config, c.get("endpointId"))!.openaiWaitMs;
    const keepAliveMs = deps.config.server.sseKeepAliveMs;
    const deadline = deps.clock.now() + waitMs;
    const job = await enqueue(c, body === undefined ? { openai_route: openaiRoute } : { openai_route: openaiRoute, openai_input: body });
    if (!body?.stream) {
      let done = await jobs.waitForFinal(job.endpointId, job.id, waitMs, signal);
      if (signal.aborted) {
        abandon(job);
        return c.body(null, 499 as never);
      }
      if (done && !isFinal(done.status)) {
        const given = await giveUp(job, done, waitMs, false);
        if (given instanceof OpenaiError) throw given;
        done = given;
      }
      if (done?.status !== "COMPLETED") throw jobFailure(done);
      const output = done.output;
      return c.json(withoutCost(Array.isArray(output) ? output[0] : output) as object);
    }

    // Until the first keep-alive interval has passed the status line is not sent, so a job that
    // fails at once (or a wait shorter than the interval) is an HTTP error, not a broken stream.
    let first = await read(job, Math.min(keepAliveMs, waitMs), signal);
    if (!first) {
      abandon(job);
      return c.body(null, 499 as never);
    }
    if (!progressed(first) && deps.clock.now() >= deadline) {
      const given = await giveUp(job, first.job!, waitMs, true);
      if (given instanceof OpenaiError) throw given;
      first = (await read(given, 0, signal)) ?? { chunks: [], job: given };
    }
    if (first.chunks.length === 0 && first.job && isFinal(first.job.status) && first.job.status !== "COMPLETED")
      throw jobFailure(first.job);
    if (!first.job) throw jobFailure(null);
    // The stream counts as a request in flight (the concurrent rate limit) until it ends.
    const release = c.get("keepAdmission")?.() ?? (() => {});
    return eventStreamResponse(
      async (send, gone) => {
        const fail = (err: OpenaiError) => send(`data: ${JSON.stringify(errorBody(err.status, err.message, err.param, err.code))}\n\n`);
        let r: Read | null = first;
        let started = false;
        while (r) {
          if (r.chunks.length) {
            send(sse(r.chunks));
            started = true;
          }
          if (!r.job || isFinal(r.job.status)) break;
          if (!r.chunks.length) send(started ? ": keepalive\n\n" : ": waiting for the first token\n\n");
          const left = deadline - deps.clock.now();
          if (!started && left <= 0) {
            const given = await giveUp(job, r.job, waitMs, true);
            if (given instanceof OpenaiError) return fail(given);
            r = await read(given, 0, gone);
            continue;
          }
          r = await read(job, started ? keepAliveMs : Math.min(keepAliveMs, left), gone);
        }
        if (!r) return;
        if (r.job?.status === "COMPLETED") send("data: [DONE]\n\n");
        else fail(jobFailure(r.job));
      },
      { release, onCancel: () => abandon(job), headers: { connection: "keep-alive" } },
    );
  }

  /**
   * The request body as an object. When the endpoint's input schema is unknown (outside workers),
   * the least any worker needs is checked here, so that nothing no worker could answer is queued.
   */
  async function requestBody(c: Context<AppEnv>, least: z.ZodType): Promise<Record<string, unknown>> {
    const body = await readJson(c.req.raw);
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw new OpenaiError(400, "the request body must be a JSON object");
    if (!(await deps.inputSchemas?.get(c.get("endpointId")))) {
      const checked = least.safeParse(body);
      if (!checked.success) throw invalid(checked.error);
    }
    return body as Record<string, unknown>;
  }

  for (const base of BASES) {
    app.post(`${base}/chat/completions`, limitBody(LIMITS.runsyncBodyBytes), async (c) =>
      relay(c, ROUTES.chat, await requestBody(c, chatCompletionRequestSchema)),
    );
    app.post(`${base}/completions`, limitBody(LIMITS.runsyncBodyBytes), async (c) =>
      relay(c, ROUTES.completions, await requestBody(c, completionRequestSchema)),
    );
    app.get(`${base}/models`, (c) => relay(c, ROUTES.models));
    app.all(`${base}/*`, (c) => {
      throw new OpenaiError(
        404,
        `no route for ${c.req.method} ${new URL(c.req.url).pathname}; this interface has POST chat/completions, POST completions and GET models`,
      );
    });
  }

  return app;
}
