import { Hono, type Context } from "hono";
import { getQueryParam } from "hono/utils/url";
import { LIMITS } from "../../protocol/limits.ts";
import type { AppEnv } from "../app-deps.ts";
import { declaredTooLarge, intQuery, limitStreamedBody, tooLarge } from "../http/request-input.ts";
import type { Call } from "../http/pipeline.ts";
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

/** Any route of the table, by its path, when the path has no `%` (Hono's router decodes those). */
const MATCH = new RegExp(`^/v2/([^/%#]+)/(${OPS.join("|")})(?:/([^/%#]+))?(?:/([^/%#]+))?$`);

/** A query parameter as Hono's c.req.query(name) reads it. */
const query = (url: string, name: string) => getQueryParam(url, name) as string | undefined;

/**
 * The requests every job makes: POST /run and /runsync, GET /status, the worker's GET /job-take
 * and /job-take-batch and POST /job-done. They pass the app's steps like every other route (the
 * key, the endpoint, the scope and the rate limits are checked before they answer); `match` is
 * the app's router for them, one regular expression over the path, and answers without a Hono
 * context. Hono's router has them too (`routes`), for what `match` leaves to it: a HEAD, a path
 * with a `%`, and a status asked as server-sent events, which goes on to routes/sse-routes.ts.
 */
export function jobRoutes(steps: { client: ClientSteps; worker: WorkerSteps }) {
  const { client, worker } = steps;

  /** The route's answer: its JSON text with a 200, or a 204. */
  async function answer(call: Call, op: Op, a = "", b = ""): Promise<Response> {
    const endpointId = call.endpointId!;
    const key = call.key!;
    let req = call.req;
    const maxBody = ROUTES[op].maxBody;
    if (maxBody) {
      const over = declaredTooLarge(req.headers, maxBody);
      if (over) throw tooLarge(maxBody);
      if (over === undefined) req = await limitStreamedBody(req, maxBody);
    }
    const url = req.url;
    let text: string | null;
    switch (op) {
      case "run":
        text = await client.run(endpointId, key, req);
        break;
      case "runsync":
        text = await client.runsync(endpointId, key, req, query(url, "wait"));
        break;
      case "status":
        text = await client.status(endpointId, key, a, query(url, "ttl"));
        break;
      case "job-done":
        await worker.done(endpointId, key.id, pathSegment(a), pathSegment(b), req, query(url, "isStream") === "true");
        text = "{}";
        break;
      default: {
        const batch = op === "job-take-batch";
        const size = batch ? intQuery(query(url, "batch_size"), "batch_size", 1, MAX_BATCH, 1) : 1;
        text = await worker.take(endpointId, key.id, pathSegment(a), size, batch, req.signal);
      }
    }
    return text === null ? new Response(null, { status: 204 }) : jsonTextResponse(text);
  }

  const routes = new Hono<AppEnv>();
  for (const op of OPS) {
    const [first, second] = ROUTES[op].params;
    routes.on(ROUTES[op].method, TEMPLATE[op], (c: Context<AppEnv>, next) =>
      op === "status" && wantsEvents(c.req.raw)
        ? next()
        : answer(c.env as Call, op, first && c.req.param(first), second && c.req.param(second)),
    );
  }

  /**
   * Routes `call` when its path is one of a job's routes: sets its route template and its answer
   * and returns true.
   */
  function match(call: Call): boolean {
    const m = MATCH.exec(call.path);
    if (!m) return false;
    const op = m[2] as Op;
    const params = m[4] !== undefined ? 2 : m[3] !== undefined ? 1 : 0;
    const req = call.req;
    if (req.method !== ROUTES[op].method || params !== ROUTES[op].params.length) return false;
    if (op === "status" && wantsEvents(req)) return false;
    call.route = TEMPLATE[op];
    const [, , , a, b] = m;
    call.answer = (routed) => answer(routed, op, a, b);
    return true;
  }

  return { routes, match };
}
