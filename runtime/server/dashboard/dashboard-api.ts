import { Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import { findEndpoint } from "../../config/config.ts";
import type { AppDeps, AppEnv } from "../app-deps.ts";
import { authenticate } from "../http/access.ts";
import { HttpError, jobNotFound } from "../http/http-error.ts";
import { jobResponse } from "../jobs/job-view.ts";
import { streamElement } from "../routes/client-routes.ts";
import type { StoredJob } from "../store/store.ts";
import { dashboardEvents } from "./dashboard-events.ts";

/** Most stream chunks a job's detail carries; the rest are counted, not sent. */
const DETAIL_CHUNKS = 500;

/**
 * The dashboard's reads that the job API has no route for: the endpoints a key may see (with
 * their settings and input schema), an endpoint's recent figures, a job's whole detail and the
 * job events. Same keys and scopes as /v2: any
 * key but a worker key, only its endpoints; a client key sees the input of its own jobs only.
 */
export function dashboardApi(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const schemas = new Map<string, Promise<unknown>>();

  app.use(authenticate(deps));
  app.use(async (c, next) => {
    if (c.get("key").scope === "worker")
      throw new HttpError(401, "this API key is a worker key; the dashboard needs a full, client or read-only key");
    await next();
  });
  app.use("/endpoints/:endpoint/*", endpointAccess(deps));

  app.get("/events", dashboardEvents(deps));

  app.get("/endpoints", async (c) => {
    const key = c.get("key");
    const ids = Object.keys(deps.config.endpoints).filter((id) => !key.endpoints || key.endpoints.includes(id));
    const endpoints = await Promise.all(
      ids.map(async (id) => {
        const ep = deps.config.endpoints[id]!;
        return {
          id,
          handler: ep.handler?.split("/").pop() ?? null,
          workersMin: ep.workersMin,
          workersMax: ep.workersMax,
          idleTimeout: ep.idleTimeout,
          executionTimeout: ep.executionTimeout,
          scalerType: ep.scalerType,
          scalerValue: ep.scalerValue,
          startFailureLimit: ep.startFailureLimit,
          startFailureWindowMs: ep.startFailureWindowMs,
          onStartFailure: ep.onStartFailure,
          inputSchema: await inputSchema(id),
        };
      }),
    );
    return c.json({ key: { name: key.name, scope: key.scope, endpoints: key.endpoints ?? null }, endpoints });
  });

  app.get("/endpoints/:endpoint/stats", (c) => c.json(deps.stats.get(c.get("endpointId"))));

  // This server's workers of the endpoint: their start, exit and error output, last lines only.
  app.get("/endpoints/:endpoint/worker-log", (c) => c.json({ lines: deps.workerLog?.lines(c.get("endpointId")) ?? [] }));

  app.get("/endpoints/:endpoint/jobs/:id", async (c) => {
    const id = c.req.param("id");
    const read = await deps.store.readChunks(c.get("endpointId"), id, 0, deps.clock.now());
    if (!read) throw jobNotFound(id);
    const { job, chunks } = read;
    const key = c.get("key");
    const inputVisible = key.scope !== "client" || job.keyId === key.id;
    return c.json({
      ...jobResponse(job),
      ...(inputVisible
        ? { input: withoutS3Config(job.input) }
        : { inputHidden: "the input of a job submitted with another key is not shown to a client key" }),
      ...(job.progress !== undefined ? { progress: job.progress } : {}),
      ...times(job),
      policy: job.policy,
      sync: job.sync,
      retries: job.retries,
      losses: job.losses,
      stream: chunks.slice(0, DETAIL_CHUNKS).map(streamElement),
      streamChunks: chunks.length,
    });
  });

  /** The endpoint's input as JSON Schema, or null when the server cannot read it (a built binary). */
  function inputSchema(endpointId: string): Promise<unknown> {
    let p = schemas.get(endpointId);
    if (!p) {
      p = (async () => {
        const schema = await deps.inputSchemas?.get(endpointId);
        if (!schema) return null;
        try {
          return z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
        } catch {
          return null;
        }
      })();
      schemas.set(endpointId, p);
    }
    return p;
  }

  return app;
}

/** 404 for an unknown endpoint, 401 for one the key is not restricted to. */
function endpointAccess(deps: AppDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const endpointId = c.req.param("endpoint")!;
    if (!findEndpoint(deps.config, endpointId)) throw new HttpError(404, `endpoint ${endpointId} not found`);
    const key = c.get("key");
    if (key.endpoints && !key.endpoints.includes(endpointId)) {
      throw new HttpError(401, `this API key is restricted to endpoints ${key.endpoints.join(", ")}`);
    }
    c.set("endpointId", endpointId);
    await next();
  };
}

/** The job's input without any s3Config a client put inside it (credentials are never shown). */
function withoutS3Config(input: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(input, "s3Config")) return input;
  const { s3Config: _, ...rest } = input;
  return rest;
}

function times(job: StoredJob) {
  const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
  return {
    createdAt: iso(job.createdAt),
    queuedAt: iso(job.queuedAt),
    startedAt: iso(job.startedAt),
    completedAt: iso(job.completedAt),
    expiresAt: iso(job.expiresAt),
  };
}
