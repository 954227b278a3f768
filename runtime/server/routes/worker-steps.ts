import { jobDoneSchema, type TakenJob } from "../../protocol/worker-wire.ts";
import type { RouteDeps } from "../app-deps.ts";
import { costOf } from "../jobs/job-cost.ts";
import { readJson, validate } from "../http/request-input.ts";
import { rawJson, stringifyWith } from "../store/raw-json.ts";
import type { StoredJob } from "../store/store.ts";
import { KNOWN_ONLY, WorkerPresence } from "../jobs/worker-presence.ts";
import { HttpError } from "../http/http-error.ts";

export { MAX_TAKE_BATCH as MAX_BATCH } from "../../protocol/limits.ts";
/** Largest result or stream post a worker may send. */
export const MAX_RESULT_BYTES = 64 * 1024 * 1024;

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
    ...(job.traceparent ? { traceparent: job.traceparent } : {}),
  } satisfies TakenJob;
  return raw === undefined ? JSON.stringify(body) : stringifyWith(body, "input", raw);
}

/**
 * runpod-python appends `&job_in_progress=..` to its URL templates with a bare `&`; when a
 * template has no `?` that text lands in the last path segment, so cut it off there.
 */
export const pathSegment = (value: string) => value.split("&")[0]!;

/**
 * The worker protocol's steps every job goes through (take, done) as functions of the request's
 * parts (routes/job-routes.ts), with the worker presence every worker route records.
 */
export class WorkerSteps {
  readonly presence: WorkerPresence;
  readonly #deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.#deps = deps;
    this.presence = new WorkerPresence(deps.store, deps.scaler);
  }

  /**
   * Up to `max` queued jobs for the worker, waiting up to server.takeWaitMs for one, as the JSON
   * text job-take answers (one object; an array for job-take-batch); null when none came (204).
   */
  async take(
    endpointId: string,
    keyId: string,
    workerId: string,
    max: number,
    batch: boolean,
    signal: AbortSignal,
  ): Promise<string | null> {
    const { clock, config, jobs } = this.#deps;
    const before = this.presence.touch(workerId, endpointId, keyId, clock.now());
    if (before) await before;
    const taken = await jobs.take(endpointId, workerId, max, config.server.takeWaitMs, signal);
    const after = this.presence.touch(workerId, endpointId, keyId, clock.now());
    if (after) await after;
    if (!taken) return null;
    return batch ? `[${taken.map(takenJson).join(",")}]` : takenJson(taken[0]!);
  }

  /**
   * A job-done post: its body read and checked (400), then the job's progress or result.
   * Idempotent: a repeated or late post of the endpoint's job changes nothing (runpod-python
   * drops a result on a 4xx); a job the endpoint does not have is a 404.
   */
  async done(endpointId: string, keyId: string, workerId: string, jobId: string, req: Request, isStream: boolean): Promise<void> {
    const { store, clock, jobs } = this.#deps;
    const body = validate(jobDoneSchema, await readJson(req), "job-done body");
    const now = clock.now();
    const touched = this.presence.touch(workerId, endpointId, keyId, now, KNOWN_ONLY);
    if (touched) await touched;
    let applied: unknown;
    if (body.status === "IN_PROGRESS") {
      applied = await store.progress(workerId, jobId, body.output, now);
    } else if (body.error !== undefined && body.error !== null && body.error !== "") {
      applied = await jobs.finish(workerId, jobId, { error: body.error }, false);
    } else {
      // A handler that did not stream returns its output as its stream (one chunk, split past 1 MB).
      applied = await jobs.finish(workerId, jobId, { output: body.output }, !isStream && body.output !== undefined, costOf(body.output));
    }
    if (!applied) await this.ownJob(endpointId, workerId, jobId);
  }

  /**
   * A post that changed nothing: fine (idempotent) for a job of the endpoint, a 404 for one it
   * does not have, so that no endpoint learns of another's jobs. (A worker only ever runs jobs of
   * its own endpoint: a job it runs needs no look-up.)
   */
  async ownJob(endpointId: string, workerId: string, jobId: string): Promise<void> {
    const { store, clock } = this.#deps;
    if (!(await store.get(endpointId, jobId, clock.now()))) throw new HttpError(404, `job ${jobId} not found for worker ${workerId}`);
  }
}
