import { Hono, type Context } from "hono";
import { jobDoneSchema, jobStreamSchema, type JobStopResponse, type TakenJob } from "../../protocol/worker-wire.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { intQuery, limitBody, readJson, validate } from "../request-input.ts";
import { topics } from "../store/store-events.ts";
import { rawJson, stringifyWith } from "../store/raw-json.ts";
import { jsonText } from "./json-text.ts";
import type { StoredJob } from "../store/store.ts";
import { costOf } from "../job-cost.ts";
import { splitChunk } from "../stream-chunks.ts";
import { waitFor } from "../wait-for.ts";
import { WorkerPresence } from "../worker-presence.ts";

const MAX_BATCH = 64;
/** Largest result or stream post a worker may send. */
const MAX_RESULT_BYTES = 64 * 1024 * 1024;

/**
 * What a worker receives for a taken job, as JSON text; s3Config goes to the worker and nowhere
 * else. A large input goes out as the text it was stored as (its key then comes last).
 */
function takenJson(job: StoredJob): string {
  const raw = rawJson(job, "input");
  const body = {
    id: job.id,
    input: raw === undefined ? job.input : {}, // replaced by the text
    ...(job.webhook ? { webhook: job.webhook } : {}),
    ...(job.s3Config ? { s3Config: job.s3Config } : {}),
    policy: job.policy,
    deadline: job.deadline!,
  } satisfies TakenJob;
  return raw === undefined ? JSON.stringify(body) : stringifyWith(body, "input", raw);
}

/**
 * runpod-python appends `&job_in_progress=..` to its URL templates with a bare `&`; when a
 * template has no `?` that text lands in the last path segment, so cut it off there.
 */
const segment = (c: Context<AppEnv>, name: string) => c.req.param(name)!.split("&")[0]!;

/** The worker protocol of runpod-python: take, done, stream, ping, stop. */
export function workerRoutes(deps: RouteDeps): Hono<AppEnv> {
  const { store, clock, config } = deps;
  const wake = { events: store.events, clock };
  const presence = new WorkerPresence(store, deps.workerSeen);
  const app = new Hono<AppEnv>();

  async function take(c: Context<AppEnv>, max: number) {
    const workerId = segment(c, "worker");
    const endpointId = c.get("endpointId");
    const signal = c.req.raw.signal;
    await presence.touch(workerId, endpointId, clock.now());
    const jobs = await deps.jobs.take(endpointId, workerId, max, config.server.takeWaitMs, signal);
    await presence.touch(workerId, endpointId, clock.now());
    return jobs;
  }

  app.get("/job-take/:worker", async (c) => {
    const jobs = await take(c, 1);
    return jobs ? jsonText(c, takenJson(jobs[0]!)) : c.body(null, 204);
  });

  app.get("/job-take-batch/:worker", async (c) => {
    const size = intQuery(c.req.query("batch_size"), "batch_size", 1, MAX_BATCH, 1);
    const jobs = await take(c, size);
    return jobs ? jsonText(c, `[${jobs.map(takenJson).join(",")}]`) : c.body(null, 204);
  });

  app.post("/job-done/:worker/:job", limitBody(MAX_RESULT_BYTES), async (c) => {
    const workerId = segment(c, "worker");
    const jobId = segment(c, "job");
    const body = validate(jobDoneSchema, await readJson(c.req.raw), "job-done body");
    const now = clock.now();
    await presence.touch(workerId, c.get("endpointId"), now);
    if (body.status === "IN_PROGRESS") {
      await store.progress(workerId, jobId, body.output, now);
      return c.json({});
    }
    const isStream = c.req.query("isStream") === "true";
    if (body.error !== undefined && body.error !== null && body.error !== "") {
      await deps.jobs.finish(workerId, jobId, { error: body.error }, false);
    } else {
      // A handler that did not stream returns its output as its stream (one chunk, split past 1 MB).
      await deps.jobs.finish(workerId, jobId, { output: body.output }, !isStream && body.output !== undefined, costOf(body.output));
    }
    // Idempotent: a repeated or late post changes nothing and is still answered 200, since
    // runpod-python drops a result on a 4xx.
    return c.json({});
  });

  app.post("/job-stream/:worker/:job", limitBody(MAX_RESULT_BYTES), async (c) => {
    const workerId = segment(c, "worker");
    const jobId = segment(c, "job");
    const body = validate(jobStreamSchema, await readJson(c.req.raw), "job-stream body");
    await presence.touch(workerId, c.get("endpointId"), clock.now());
    await store.appendChunks(workerId, jobId, splitChunk(body.output), clock.now());
    return c.json({});
  });

  app.get("/ping/:worker", async (c) => {
    const ids = c.req.query("job_id");
    const status = c.req.query("status");
    await presence.touch(segment(c, "worker"), c.get("endpointId"), clock.now(), {
      runningIds: ids ? ids.split(",").filter(Boolean) : [],
      missingAfterMs: config.server.pingGraceMs,
      unhealthy: status === "unhealthy" ? { check: c.req.query("check") ?? "", reason: c.req.query("reason") ?? "" } : null,
    });
    return c.json({});
  });

  app.get("/job-stop/:worker", async (c) => {
    const workerId = segment(c, "worker");
    await presence.touch(workerId, c.get("endpointId"), clock.now());
    const signal = c.req.raw.signal;
    const ids = await waitFor(wake, topics.stop(workerId), config.server.stopWaitMs, async () => {
      if (signal.aborted) return null;
      const stops = await store.takeStops(workerId);
      return stops.length ? stops : null;
    }, signal);
    return ids ? c.json({ jobsToStop: ids } satisfies JobStopResponse) : c.body(null, 204);
  });

  return app;
}
