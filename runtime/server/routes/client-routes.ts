import { startsWorkers } from "../../config/config.ts";
import { Hono } from "hono";
import type { HealthResponse, JobState, PurgeResponse, RequestsPage, StreamResponse } from "../../protocol/job-response.ts";
import { JOB_STATES, LIMITS, type JobStatus } from "../../protocol/limits.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { HttpError, jobNotFound } from "../http/http-error.ts";
import { jobResponse, jobResponseJson } from "../jobs/job-view.ts";
import { jsonText } from "./json-text.ts";
import { intQuery } from "../http/request-input.ts";
import type { JobLogsResponse } from "../../protocol/job-log.ts";

/** The client side of /v2/<endpoint_id> besides run, runsync and status (job-routes.ts): wait, stream, logs, cancel, retry, purge, health, requests. */
export function clientRoutes(deps: RouteDeps): Hono<AppEnv> {
  const { store, clock, config, jobs } = deps;
  const app = new Hono<AppEnv>();

  app.get("/status-sync/:id", async (c) => {
    const id = c.req.param("id");
    const wait = intQuery(c.req.query("wait"), "wait", 0, LIMITS.runsyncWaitMax, LIMITS.runsyncWaitDefault);
    const job = await jobs.waitForFinal(c.get("endpointId"), id, wait, c.req.raw.signal);
    if (!job) throw jobNotFound(id);
    return jsonText(c, jobResponseJson(job));
  });

  app.get("/stream/:id", async (c) => {
    const id = c.req.param("id");
    // Wait briefly for something new: the JS client polls /stream back to back.
    const r = await jobs.readStream(c.get("endpointId"), id, config.server.streamWaitMs, c.req.raw.signal);
    if (!r) throw jobNotFound(id);
    const body: StreamResponse = { id, status: r.job.status, stream: r.chunks.map(streamElement) };
    return c.json(body);
  });

  app.get("/logs/:id", async (c) => {
    const id = c.req.param("id");
    const since = intQuery(c.req.query("since"), "since", 0, 1_000_000_000, 0);
    const read = await store.readLogs(c.get("endpointId"), id, since, clock.now());
    if (!read) throw jobNotFound(id);
    return c.json({ id, logs: read.lines, truncated: read.truncated } satisfies JobLogsResponse);
  });

  app.post("/cancel/:id", async (c) => {
    const id = c.req.param("id");
    const job = await jobs.cancel(c.get("endpointId"), id);
    if (!job) throw jobNotFound(id);
    return c.json({ id: job.id, status: job.status } satisfies JobState);
  });

  app.post("/retry/:id", async (c) => {
    const id = c.req.param("id");
    const outcome = await jobs.retry(c.get("endpointId"), id);
    if (outcome.kind === "not-found") throw jobNotFound(id);
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
    health.workers.initializing = deps.scaler?.initializing(c.get("endpointId")) ?? 0;
    const starting = deps.startFailures?.report(c.get("endpointId"));
    if (starting) {
      health.workers.failing = starting.failing;
      health.lastStartError = starting.lastStartError;
    }
    const stopping = deps.scaler?.stopping(c.get("endpointId")) ?? 0;
    // A stopping process is not idle, whatever its last heartbeat said.
    health.workers.idle = Math.max(0, health.workers.idle - stopping);
    // Present only while there is one: RunPod's health has no such state.
    if (stopping > 0) health.workers.stopping = stopping;
    const held = deps.scaler?.held(c.get("endpointId"));
    if (held) health.scaleUpHeld = held;
    const endpoint = config.endpoints[c.get("endpointId")];
    if (deps.sandbox && endpoint && startsWorkers(config, endpoint)) health.sandbox = deps.sandbox;
    return c.json(health satisfies HealthResponse);
  });

  app.get("/requests", async (c) => {
    const limit = intQuery(c.req.query("limit"), "limit", 1, 100, 20);
    const cursor = c.req.query("cursor");
    if (cursor !== undefined && !/^\d+$/.test(cursor))
      throw new HttpError(400, "query parameter cursor is not a cursor from an earlier page");
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
