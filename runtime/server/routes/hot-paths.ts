import { getQueryParam } from "hono/utils/url";
import { LIMITS } from "../../protocol/limits.ts";
import type { Access } from "../http/access.ts";
import type { RouteDeps } from "../app-deps.ts";
import { errorAnswer } from "../http/http-error.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import { declaredTooLarge, intQuery, tooLarge } from "../http/request-input.ts";
import type { ClientSteps } from "./client-steps.ts";
import { jsonTextResponse } from "./json-text.ts";
import { wantsEvents } from "./sse-routes.ts";
import { MAX_BATCH, MAX_RESULT_BYTES, pathSegment, type WorkerSteps } from "./worker-steps.ts";

/** The requests every job makes: /v2/<endpoint>/<op>[/<a>[/<b>]], without `%` (Hono decodes those). */
const HOT = /^\/v2\/([^/%#]+)\/(run|runsync|status|job-take|job-take-batch|job-done)(?:\/([^/%#]+))?(?:\/([^/%#]+))?$/;

/** What each answers to, and the route it is counted under (as the Hono app's request counter labels it). */
const SHAPES = {
  run: { method: "POST", params: 0, route: "/v2/:endpoint/run", maxBody: LIMITS.runBodyBytes },
  runsync: { method: "POST", params: 0, route: "/v2/:endpoint/runsync", maxBody: LIMITS.runsyncBodyBytes },
  status: { method: "GET", params: 1, route: "/v2/:endpoint/status/:id", maxBody: 0 },
  "job-take": { method: "GET", params: 1, route: "/v2/:endpoint/job-take/:worker", maxBody: 0 },
  "job-take-batch": { method: "GET", params: 1, route: "/v2/:endpoint/job-take-batch/:worker", maxBody: 0 },
  "job-done": { method: "POST", params: 2, route: "/v2/:endpoint/job-done/:worker/:job", maxBody: MAX_RESULT_BYTES },
} as const;
type Op = keyof typeof SHAPES;

/** A query parameter as Hono's c.req.query(name) reads it. */
const query = (url: string, name: string) => getQueryParam(url, name) as string | undefined;

/**
 * The requests of a job's path (POST /run and /runsync, GET /status, the worker's GET /job-take
 * and /job-take-batch and POST /job-done), answered without Hono's router and middleware chain,
 * which cost a no-op job about a sixth of the server's CPU. They make the checks of the Hono
 * routes in the same order, through the same functions (Access, request-input, ClientSteps,
 * WorkerSteps), and are counted under the same route labels, so their answers are the same. Any
 * other request, and any of these the fast form does not cover (HEAD, a chunked body, a `%` in
 * the path, a status asked as server-sent events), returns undefined, for the Hono app to answer.
 */
export function hotPaths(
  deps: RouteDeps,
  access: Access,
  steps: { client: ClientSteps; worker: WorkerSteps },
  metrics: ServerMetrics,
): (req: Request) => Promise<Response> | undefined {
  const answerError = errorAnswer(deps.log);
  const { client, worker } = steps;

  /** The 200 answer's JSON text, or null for a 204. */
  async function handle(req: Request, url: string, path: string, op: Op, endpointId: string, a: string, b: string): Promise<string | null> {
    // A cached key and an admission counted in memory come back at once, not as promises.
    const keyed = access.key(req.headers.get("authorization") ?? undefined);
    const key = keyed instanceof Promise ? await keyed : keyed;
    const endpoint = access.endpoint(key, endpointId, op, { method: req.method, path, hasTtl: () => query(url, "ttl") !== undefined });
    const admitted = access.admit(endpointId, endpoint, op);
    const release = admitted instanceof Promise ? await admitted : admitted;
    try {
      const maxBody = SHAPES[op].maxBody;
      if (maxBody && declaredTooLarge(req.headers, maxBody)) throw tooLarge(maxBody);
      switch (op) {
        case "run":
          return await client.run(endpointId, key, req);
        case "runsync":
          return await client.runsync(endpointId, key, req, query(url, "wait"));
        case "status":
          return await client.status(endpointId, key, a, query(url, "ttl"));
        case "job-done":
          await worker.done(endpointId, key.id, pathSegment(a), pathSegment(b), req, query(url, "isStream") === "true");
          return "{}";
        default: {
          const batch = op === "job-take-batch";
          const size = batch ? intQuery(query(url, "batch_size"), "batch_size", 1, MAX_BATCH, 1) : 1;
          return await worker.take(endpointId, key.id, pathSegment(a), size, batch, req.signal);
        }
      }
    } finally {
      const released = release?.();
      if (released) await released;
    }
  }

  async function answer(req: Request, url: string, path: string, op: Op, endpointId: string, a: string, b: string): Promise<Response> {
    let res: Response;
    try {
      const text = await handle(req, url, path, op, endpointId, a, b);
      res = text === null ? new Response(null, { status: 204 }) : jsonTextResponse(text);
    } catch (err) {
      res = answerError(err, req);
    }
    metrics.httpRequest(req.method, SHAPES[op].route, res.status);
    return res;
  }

  return (req) => {
    const url = req.url;
    const start = url.indexOf("/", url.indexOf(":") + 4); // where Hono's getPath starts
    const q = url.indexOf("?", start);
    const path = q === -1 ? url.slice(start) : url.slice(start, q);
    const m = HOT.exec(path);
    if (!m) return undefined;
    const op = m[2] as Op;
    const shape = SHAPES[op];
    const params = m[4] !== undefined ? 2 : m[3] !== undefined ? 1 : 0;
    if (req.method !== shape.method || params !== shape.params) return undefined;
    // A body of undeclared length is limited as it streams in, by the Hono route's body limit.
    if (shape.maxBody && declaredTooLarge(req.headers, Infinity) === undefined) return undefined;
    if (op === "status" && wantsEvents(req)) return undefined;
    return answer(req, url, path, op, m[1]!, m[3] ?? "", m[4] ?? "");
  };
}
