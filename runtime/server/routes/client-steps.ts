import type { JobState } from "../../protocol/job-response.ts";
import { isFinal, LIMITS } from "../../protocol/limits.ts";
import type { RouteDeps } from "../app-deps.ts";
import { HttpError, jobNotFound } from "../http/http-error.ts";
import { jobResponseJson } from "../jobs/job-view.ts";
import { idempotencyKey, intQuery, originToRecord, readJobRequest, traceparentOf } from "../http/request-input.ts";
import type { ApiKeyRecord } from "../store/store.ts";

/**
 * The client requests of a job's path (run, runsync, status), as functions of the request's
 * parts, each returning its 200 answer as JSON text (routes/job-routes.ts).
 */
export class ClientSteps {
  readonly #deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.#deps = deps;
  }

  /** POST /run: the job request read and checked (400), then submitted. */
  async run(endpointId: string, key: ApiKeyRecord, req: Request): Promise<string> {
    const idempotent = idempotencyKey(req.headers);
    const job = await this.#deps.jobs.submit(endpointId, await readJobRequest(req), {
      keyId: key.id,
      sync: false,
      idempotencyKey: idempotent,
      origin: originToRecord(req.url, this.#deps.scaler),
      traceparent: traceparentOf(req.headers),
    });
    return JSON.stringify({ id: job.id, status: job.status } satisfies JobState);
  }

  /** POST /runsync?wait=: submitted, then answered when final, or with its id and status after `wait` ms. */
  async runsync(endpointId: string, key: ApiKeyRecord, req: Request, waitParam: string | undefined): Promise<string> {
    const { jobs } = this.#deps;
    const wait = intQuery(waitParam, "wait", LIMITS.runsyncWaitMin, LIMITS.runsyncWaitMax, LIMITS.runsyncWaitDefault);
    const idempotent = idempotencyKey(req.headers);
    const job = await jobs.submit(endpointId, await readJobRequest(req), {
      keyId: key.id,
      sync: true,
      idempotencyKey: idempotent,
      origin: originToRecord(req.url, this.#deps.scaler),
      traceparent: traceparentOf(req.headers),
    });
    const settled = (await jobs.waitForFinal(endpointId, job.id, wait, req.signal)) ?? job;
    if (!isFinal(settled.status)) return JSON.stringify({ id: settled.id, status: settled.status } satisfies JobState);
    return jobResponseJson(settled);
  }

  /** GET /status/<id>?ttl=: the job response (a queued job with its queuePosition); `ttl` resets its lifetime. */
  async status(endpointId: string, key: ApiKeyRecord, id: string, ttlParam: string | undefined): Promise<string> {
    const { store, clock } = this.#deps;
    const ttl = intQuery(ttlParam, "ttl", LIMITS.ttlMin, LIMITS.ttlMax);
    if (ttl !== undefined && key.scope === "read-only") {
      throw new HttpError(401, "this API key is read-only; changing a job's lifetime (?ttl) needs a full key");
    }
    const now = clock.now();
    const job = ttl === undefined ? await store.get(endpointId, id, now) : await store.setExpiry(endpointId, id, now + ttl, now);
    if (!job) throw jobNotFound(id);
    const position = job.status === "IN_QUEUE" ? await store.queuePosition(endpointId, id, now) : null;
    return jobResponseJson(job, position === null ? undefined : { queuePosition: position });
  }
}
