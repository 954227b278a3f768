import { boundToAnotherWorker } from "../keys/worker-keys.ts";
import { Hono, type Context } from "hono";
import { jobStreamSchema, type JobStopResponse } from "../../protocol/worker-wire.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { limitBody, readJson, validate } from "../http/request-input.ts";
import { splitChunk } from "../../protocol/stream-chunks.ts";
import { stopList } from "../jobs/stop-list.ts";
import { MAX_RESULT_BYTES, pathSegment, type WorkerSteps } from "./worker-steps.ts";
import { KNOWN_ONLY, workerNotFound } from "../jobs/worker-presence.ts";
import { clipMessage, jobLogPostSchema, type JobLogPostAnswer } from "../../protocol/job-log.ts";

/** Largest job-log post: a worker sends lines in batches well under this. */
const MAX_LOG_POST_BYTES = 4 * 1024 * 1024;

/** A path parameter, without what runpod-python's bare `&` appended to it (see pathSegment). */
const segment = (c: Context<AppEnv>, name: string) => pathSegment(c.req.param(name)!);

/** The worker protocol of runpod-python besides take and done (routes/job-routes.ts): stream, ping, stop; and Spool's job-log. */
export function workerRoutes(deps: RouteDeps, steps: WorkerSteps): Hono<AppEnv> {
  const { store, clock, config } = deps;
  const stops = stopList(store, clock, config.server.stopWaitMs);
  const presence = steps.presence;
  const app = new Hono<AppEnv>();

  app.post("/job-stream/:worker/:job", limitBody(MAX_RESULT_BYTES), async (c) => {
    const workerId = segment(c, "worker");
    const jobId = segment(c, "job");
    const body = validate(jobStreamSchema, await readJson(c.req.raw), "job-stream body");
    await presence.touch(workerId, c.get("endpointId"), c.get("key").id, clock.now(), KNOWN_ONLY);
    if (!(await store.appendChunks(workerId, jobId, splitChunk(body.output), clock.now())))
      await steps.ownJob(c.get("endpointId"), workerId, jobId);
    return c.json({});
  });

  app.post("/job-log/:worker/:job", limitBody(MAX_LOG_POST_BYTES), async (c) => {
    const workerId = segment(c, "worker");
    const jobId = segment(c, "job");
    const body = validate(jobLogPostSchema, await readJson(c.req.raw), "job-log body");
    await presence.touch(workerId, c.get("endpointId"), c.get("key").id, clock.now(), KNOWN_ONLY);
    const lines = body.logs.map((l) => ({ ...l, message: clipMessage(l.message) }));
    const kept = await store.appendLogs(workerId, jobId, lines, config.server.logMaxBytes, clock.now());
    // A job no longer running here (cancelled, timed out) takes no more lines; not an error.
    if (!kept) await steps.ownJob(c.get("endpointId"), workerId, jobId);
    return c.json({ truncated: kept?.truncated ?? false } satisfies JobLogPostAnswer);
  });

  app.get("/ping/:worker", async (c) => {
    const ids = c.req.query("job_id");
    const status = c.req.query("status");
    if (status === "start_failed") {
      // A worker whose setup failed, about to exit: not a worker that is up. A key the server
      // gave one of its workers speaks for that worker alone.
      if (boundToAnotherWorker(c.get("key").id, segment(c, "worker"))) throw workerNotFound(segment(c, "worker"));
      await deps.startFailures?.reported(
        c.get("endpointId"),
        segment(c, "worker"),
        c.req.query("reason") ?? "",
        c.req.query("permanent") === "1",
      );
      return c.json({});
    }
    const endpointId = c.get("endpointId");
    const touched = await presence.touch(segment(c, "worker"), endpointId, c.get("key").id, clock.now(), {
      runningIds: ids ? ids.split(",").filter(Boolean) : [],
      missingAfterMs: config.server.pingGraceMs,
      unhealthy: status === "unhealthy" ? { check: c.req.query("check") ?? "", reason: c.req.query("reason") ?? "" } : null,
    });
    if (touched) await deps.jobs.workerLosses(endpointId, segment(c, "worker"), touched);
    return c.json({});
  });

  app.get("/job-stop/:worker", async (c) => {
    const workerId = segment(c, "worker");
    await presence.touch(workerId, c.get("endpointId"), c.get("key").id, clock.now());
    const ids = await stops(workerId)(c.req.raw.signal);
    return ids.length ? c.json({ jobsToStop: ids } satisfies JobStopResponse) : c.body(null, 204);
  });

  return app;
}
