import { getQueryParam } from "hono/utils/url";
import { LIMITS } from "../../protocol/limits.ts";
import type { Access } from "../access.ts";
import type { RouteDeps } from "../app-deps.ts";
import { errorAnswer, jsonAnswer } from "../http-error.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import { declaredTooLarge, intQuery, readJobRequest, tooLarge } from "../request-input.ts";
import { MAX_BATCH, MAX_RESULT_BYTES, pathSegment, type WorkerSteps } from "./worker-steps.ts";

/** The requests every job makes: /v2/<endpoint>/<op>[/<worker>[/<job>]], without `%` (Hono decodes those). */
const HOT = /^\/v2\/([^/%#]+)\/(run|job-take|job-take-batch|job-done)(?:\/([^/%#]+))?(?:\/([^/%#]+))?$/;

/** What each answers to, and the route it is counted under (as the Hono app's request counter labels it). */
const SHAPES = {
  run: { method: "POST", params: 0, route: "/v2/:endpoint/run" },
  "job-take": { method: "GET", params: 1, route: "/v2/:endpoint/job-take/:worker" },
  "job-take-batch": { method: "GET", params: 1, route: "/v2/:endpoint/job-take-batch/:worker" },
  "job-done": { method: "POST", params: 2, route: "/v2/:endpoint/job-done/:worker/:job" },
} as const;
type Op = keyof typeof SHAPES;

/** A query parameter as Hono's c.req.query(name) reads it. */
const query = (url: string, name: string) => getQueryParam(url, name) as string | undefined;

/**
 * The four requests every job makes (POST /run, GET /job-take and /job-take-batch, POST
 * /job-done), answered without Hono's router and middleware chain, which cost a no-op job about
 * as much CPU as the store's writes. They make the checks of the Hono routes in the same order,
 * through the same functions (Access, request-input, WorkerSteps, the job service), and are
 * counted under the same route labels, so their answers are the same. Any other request, and
 * any of these the fast form does not cover (HEAD, a chunked body, a `%` in the path), returns
 * undefined, for the Hono app to answer.
 */
export function hotPaths(deps: RouteDeps, access: Access, steps: WorkerSteps, metrics: ServerMetrics): (req: Request) => Promise<Response> | undefined {
  const answerError = errorAnswer(deps.log);

  async function answer(req: Request, url: string, path: string, endpointId: string, op: Op, worker: string, job: string): Promise<Response> {
    try {
      const key = await access.key(req.headers.get("authorization") ?? undefined);
      const endpoint = access.endpoint(key, endpointId, op, { method: req.method, path, hasTtl: () => query(url, "ttl") !== undefined });
      const release = await access.admit(endpointId, endpoint, op);
      try {
        if (op === "run") {
          if (declaredTooLarge(req.headers, LIMITS.runBodyBytes)) throw tooLarge(LIMITS.runBodyBytes);
          const submitted = await deps.jobs.submit(endpointId, await readJobRequest(req), { keyId: key.id, sync: false });
          return jsonAnswer({ id: submitted.id, status: submitted.status });
        }
        if (op === "job-done") {
          if (declaredTooLarge(req.headers, MAX_RESULT_BYTES)) throw tooLarge(MAX_RESULT_BYTES);
          await steps.done(endpointId, pathSegment(worker), pathSegment(job), req, query(url, "isStream") === "true");
          return jsonAnswer({});
        }
        const batch = op === "job-take-batch";
        const size = batch ? intQuery(query(url, "batch_size"), "batch_size", 1, MAX_BATCH, 1) : 1;
        const text = await steps.take(endpointId, pathSegment(worker), size, batch, req.signal);
        return text === null ? new Response(null, { status: 204 }) : new Response(text, { headers: { "content-type": "application/json" } });
      } finally {
        await release?.();
      }
    } catch (err) {
      return answerError(err, req);
    }
  }

  return (req) => {
    const url = req.url;
    const start = url.indexOf("/", url.indexOf(":") + 4); // where Hono's getPath starts
    const query = url.indexOf("?", start);
    const path = query === -1 ? url.slice(start) : url.slice(start, query);
    const m = HOT.exec(path);
    if (!m) return undefined;
    const op = m[2] as Op;
    const shape = SHAPES[op];
    const params = m[4] !== undefined ? 2 : m[3] !== undefined ? 1 : 0;
    if (req.method !== shape.method || params !== shape.params) return undefined;
    // A body of undeclared length is limited as it streams in, by the Hono route's body limit.
    if (shape.method === "POST" && declaredTooLarge(req.headers, Infinity) === undefined) return undefined;
    return answer(req, url, path, m[1]!, op, m[3] ?? "", m[4] ?? "").then((res) => {
      metrics.httpRequest(shape.method, shape.route, res.status);
      return res;
    });
  };
}
