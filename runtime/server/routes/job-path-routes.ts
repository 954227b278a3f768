import { Hono, type Context, type Next } from "hono";
import { getQueryParam } from "hono/utils/url";
import { LIMITS } from "../../protocol/limits.ts";
import type { Access } from "../http/access.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { errorAnswer } from "../http/http-error.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import { declaredTooLarge, intQuery, limitStreamedBody, tooLarge } from "../http/request-input.ts";
import type { ClientSteps } from "./client-steps.ts";
import { jsonTextResponse } from "./json-text.ts";
import { wantsEvents } from "./sse-routes.ts";
import { MAX_BATCH, MAX_RESULT_BYTES, pathSegment, type WorkerSteps } from "./worker-steps.ts";

/** The routes of a job's path, each with the parameters after its endpoint and its body limit. */
const ROUTES = {
  run: { method: "POST", params: [], maxBody: LIMITS.runBodyBytes },
  runsync: { method: "POST", params: [], maxBody: LIMITS.runsyncBodyBytes },
  status: { method: "GET", params: ["id"], maxBody: 0 },
  "job-take": { method: "GET", params: ["worker"], maxBody: 0 },
  "job-take-batch": { method: "GET", params: ["worker"], maxBody: 0 },
  "job-done": { method: "POST", params: ["worker", "job"], maxBody: MAX_RESULT_BYTES },
} as const satisfies Record<string, { method: string; params: readonly string[]; maxBody: number }>;
type Op = keyof typeof ROUTES;
const OPS = Object.keys(ROUTES) as Op[];

/** Each route's template, as Hono registers it and the request counter labels it. */
const TEMPLATE = Object.fromEntries(
  OPS.map((op) => [op, ["/v2/:endpoint", op, ...ROUTES[op].params.map((p) => `:${p}`)].join("/")]),
) as Record<Op, string>;

/** Any route of the table, by its path, when the path has no `%` (Hono decodes those). */
const MATCH = new RegExp(`^/v2/([^/%#]+)/(${OPS.join("|")})(?:/([^/%#]+))?(?:/([^/%#]+))?$`);

/** A query parameter as Hono's c.req.query(name) reads it. */
const query = (url: string, name: string) => getQueryParam(url, name) as string | undefined;

/**
 * The requests every job makes: POST /run and /runsync, GET /status, the worker's GET /job-take
 * and /job-take-batch and POST /job-done. Each route makes the checks of the app's Hono middleware
 * itself (authenticate, authorize, countRequests: the same Access and ServerMetrics calls, in the
 * same order) rather than compose that middleware around each of a job's requests. The routes are registered on Hono (`routes`); `match` finds the same routes by one regular
 * expression and answers through the same handler, before Hono's router, for every request of
 * these shapes but HEAD, a `%` in the path and a status asked as server-sent events.
 */
export function jobPathRoutes(
  deps: RouteDeps,
  access: Access,
  steps: { client: ClientSteps; worker: WorkerSteps },
  metrics: ServerMetrics,
) {
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
      const maxBody = ROUTES[op].maxBody;
      if (maxBody) {
        const over = declaredTooLarge(req.headers, maxBody);
        if (over) throw tooLarge(maxBody);
        if (over === undefined) req = await limitStreamedBody(req, maxBody);
      }
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

  async function answer(req: Request, url: string, path: string, op: Op, endpointId: string, a = "", b = ""): Promise<Response> {
    let res: Response;
    try {
      const text = await handle(req, url, path, op, endpointId, a, b);
      res = text === null ? new Response(null, { status: 204 }) : jsonTextResponse(text);
    } catch (err) {
      res = answerError(err, req);
    }
    metrics.httpRequest(req.method, TEMPLATE[op], res.status);
    return res;
  }

  const routes = new Hono<AppEnv>();
  for (const op of OPS) {
    const [first, second] = ROUTES[op].params;
    routes.on(ROUTES[op].method, TEMPLATE[op], (c: Context<AppEnv>, next: Next) =>
      op === "status" && wantsEvents(c.req.raw)
        ? next()
        : answer(
            c.req.raw,
            c.req.url,
            c.req.path,
            op,
            c.req.param("endpoint")!,
            first && c.req.param(first),
            second && c.req.param(second),
          ),
    );
  }

  function match(req: Request): Promise<Response> | undefined {
    const url = req.url;
    const start = url.indexOf("/", url.indexOf(":") + 4); // where Hono's getPath starts
    const q = url.indexOf("?", start);
    const path = q === -1 ? url.slice(start) : url.slice(start, q);
    const m = MATCH.exec(path);
    if (!m) return undefined;
    const op = m[2] as Op;
    const params = m[4] !== undefined ? 2 : m[3] !== undefined ? 1 : 0;
    if (req.method !== ROUTES[op].method || params !== ROUTES[op].params.length) return undefined;
    if (op === "status" && wantsEvents(req)) return undefined;
    return answer(req, url, path, op, m[1]!, m[3], m[4]);
  }

  return { routes, match };
}
