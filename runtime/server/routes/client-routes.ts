import { Hono, type Context } from "hono";
import type { HealthResponse, JobState, PurgeResponse, RequestsPage, StreamResponse } from "../../protocol/job-response.ts";
import { isFinal, JOB_STATES, LIMITS, type JobStatus } from "../../protocol/limits.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { HttpError } from "../http-error.ts";
import { jobResponse, jobResponseJson } from "../job-view.ts";
import { jsonText } from "./json-text.ts";
import { intQuery, limitBody, readJobRequest } from "../request-input.ts";
import type { StoredJob } from "../store/store.ts";

/** The client side of /v2/<endpoint_id>: submit, poll, stream, cancel, retry, purge, health. */
export function clientRoutes(deps: RouteDeps): Hono<AppEnv> {
  const { store, clock, config, jobs } = deps;
  const app = new Hono<AppEnv>();

  const notFound = (id: string) => new HttpError(404, `job ${id} not found (unknown, purged or expired)`);

  async function submit(c: Context<AppEnv>, sync: boolean): Promise<StoredJob> {
    return jobs.submit(c.get("endpointId"), await readJobRequest(c.req.raw), { keyId: c.get("key").id, sync });
  }

  app.post("/run", limitBody(LIMITS.runBodyBytes), async (c) => {
    const job = await submit(c, false);
    return c.json({ id: job.id, status: job.status } satisfies JobState);
  });

  app.post("/runsync", limitBody(LIMITS.runsyncBodyBytes), async (c) => {
    const wait = intQuery(c.req.query("wait"), "wait", LIMITS.runsyncWaitMin, LIMITS.runsyncWaitMax, LIMITS.runsyncWaitDefault);
    const job = await submit(c, true);
    const settled = (await jobs.waitForFinal(c.get("endpointId"), job.id, wait, c.req.raw.signal)) ?? job;
    if (!isFinal(settled.status)) return c.json({ id: settled.id, status: settled.status } satisfies JobState);
    return jsonText(c, jobResponseJson(settled));
  });

  app.get("/status/:id", async (c) => {
    const id = c.req.param("id");
    const ttl = intQuery(c.req.query("ttl"), "ttl", LIMITS.ttlMin, LIMITS.ttlMax);
    if (ttl !== undefined && c.get("key").scope === "read-only") {
      throw new HttpError(401, "this API key is read-only; changing a job's lifetime (?ttl) needs a full key");
    }
    const now = clock.now();
    const job = ttl === undefined ? await store.get(c.get("endpointId"), id, now) : await store.setExpiry(c.get("endpointId"), id, now + ttl, now);
    if (!job) throw notFound(id);
    const position = job.status === "IN_QUEUE" ? await store.queuePosition(c.get("endpointId"), id, now) : null;
    return jsonText(c, jobResponseJson(job, position === null ? undefined : { queuePosition: position }));
  });

  app.get("/status-sync/:id", async (c) => {
    const id = c.req.param("id");
    const wait = intQuery(c.req.query("wait"), "wait", 0, LIMITS.runsyncWaitMax, LIMITS.runsyncWaitDefault);
    const job = await jobs.waitForFinal(c.get("endpointId"), id, wait, c.req.raw.signal);
    if (!job) throw notFound(id);
    return jsonText(c, jobResponseJson(job));
  });

  app.get("/stream/:id", async (c) => {
    const id = c.req.param("id");
    // Wait briefly for something new: the JS client polls /stream back to back.
    const r = await jobs.readStream(c.get("endpointId"), id, config.server.streamWaitMs, c.req.raw.signal);
    if (!r) throw notFound(id);
    const body: StreamResponse = { id, status: r.job.status, stream: r.chunks.map(streamElement) };
    return c.json(body);
  });

  app.post("/cancel/:id", async (c) => {
    const id = c.req.param("id");
    const job = await jobs.cancel(c.get("endpointId"), id);
    if (!job) throw notFound(id);
    return c.json({ id: job.id, status: job.status } satisfies JobState);
  });

  app.post("/retry/:id", async (c) => {
    const id = c.req.param("id");
    const outcome = await jobs.retry(c.get("endpointId"), id);
    if (outcome.kind === "not-found") throw notFound(id);
    if (outcome.kind === "conflict") {
      throw new HttpError(400, `job ${id} is ${outcome.status}; only FAILED or TIMED_OUT jobs can be retried`);
    }
    return c.json({ id: outcome.job.id, status: outcome.job.status } satisfies JobState);
  });

  app.post("/purge-queue", async (c) => {
    const removed = await jobs.purge(c.get("endpointId"));
    return c.json({ removed, status: "completed" } satisfies PurgeResponse);
  });

  app.get("/health", async (c) => {
    const health = await store.health(c.get("endpointId"), clock.now(), config.server.workerLossTimeoutMs);
    health.workers.initializing = deps.initializing?.(c.get("endpointId")) ?? 0;
    return c.json(health satisfies HealthResponse);
  });

  app.get("/requests", async (c) => {
    const limit = intQuery(c.req.query("limit"), "limit", 1, 100, 20);
    const cursor = c.req.query("cursor");
    if (cursor !== undefined && !/^\d+$/.test(cursor)) throw new HttpError(400, "query parameter cursor is not a cursor from an earlier page");
    const status = c.req.query("status");
    if (status !== undefined && !(JOB_STATES as readonly string[]).includes(status)) {
      throw new HttpError(400, `query parameter status must be one of ${JOB_STATES.join(", ")}`);
    }
    const page = await store.recent(c.get("endpointId"), clock.now(), limit, cursor, status as JobStatus | undefined);
    return c.json({
      requests: page.jobs.map((j) => ({ ...jobResponse(j), createdAt: new Date(j.createdAt).toISOString(), sync: j.sync })),
      ...(page.next ? { nextCursor: page.next } : {}),
    } satisfies RequestsPage);
  });

  return app;
}

/**
 * One element of a /stream answer: a yielded value becomes {output: value} (RunPod's shape), but
 * a value that is already a stream chunk of the specification, {output, metrics} (the text
 * model's), is passed as it is rather than nested one level deeper.
 */
export function streamElement(chunk: unknown): { output: unknown; metrics?: unknown } {
  if (typeof chunk === "object" && chunk !== null && !Array.isArray(chunk)) {
    if ("output" in chunk && "metrics" in chunk) return chunk as { output: unknown; metrics: unknown };
  }
  return { output: chunk };
}
