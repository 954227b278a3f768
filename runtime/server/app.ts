import { Hono } from "hono";
import type { AppDeps, AppEnv } from "./app-deps.ts";
import { getPath } from "hono/utils/url";
import { errorAnswer } from "./http/http-error.ts";
import { AllowedHosts, checkHost } from "./http/allowed-hosts.ts";
import { pipeline, type Call, type Step } from "./http/pipeline.ts";
import { JobService } from "./jobs/job-service.ts";
import { Access, checkAccess } from "./http/access.ts";
import { countRequests, metricsRoutes } from "./metrics/metrics-routes.ts";
import { ServerMetrics } from "./metrics/server-metrics.ts";
import { openapiRoutes } from "./openapi/openapi-routes.ts";
import type { FileStore, LocalFileStore } from "./files/file-store.ts";
import { clientRoutes } from "./routes/client-routes.ts";
import { fileDownloadRoutes, fileUploadRoutes } from "./routes/file-routes.ts";
import { openaiRoutes } from "./routes/openai-routes.ts";
import { workerRoutes } from "./routes/worker-routes.ts";
import { WorkerSteps } from "./routes/worker-steps.ts";
import { ClientSteps } from "./routes/client-steps.ts";
import { jobRoutes } from "./routes/job-routes.ts";
import { isOpenaiPath, openaiErrorAnswer } from "./routes/openai-errors.ts";
import { sseRoutes } from "./routes/sse-routes.ts";
import { dashboardApi } from "./dashboard/dashboard-api.ts";
import { scalingRoutes } from "./scaling/scaling-routes.ts";

/** The app: one fetch for Bun.serve, and the list of steps every request passes. */
export interface SpoolApp {
  /** Answers a request; `peer` is what Bun.serve passes beside it (the peer's address comes from it). */
  fetch: (req: Request, peer?: unknown) => Promise<Response>;
  /** Answers a request for `path` on http://localhost, as Hono's app.request does (tests). */
  request: (path: string, init?: RequestInit) => Promise<Response>;
  /** Adds steps that every request passes, the job routes' included, after those given before. */
  use: (...steps: Step[]) => SpoolApp;
  /** Every route, as Hono's router lists them (the job routes too: their own match answers most of their requests). */
  routes: Hono<AppEnv>["routes"];
}

/**
 * Builds the queue server's app without listening; only `serve` calls Bun.serve. Every request
 * passes one list of steps (http/pipeline.ts), in this order:
 *
 * 1. `middleware`, then whatever `use` adds: a CORS answer, a request id, an access log;
 * 2. the host check (400 for a host this server does not answer for);
 * 3. the route: the job routes' own match, or Hono's router for the template of the rest;
 * 4. the request counter, which answers a thrown error with its JSON (OpenAI's shape for the
 *    OpenAI-compatible routes) and counts it;
 * 5. the key, the endpoint, the scope and the rate limits of a /v2 request;
 * 6. the route's answer: a job route's at once, every other through Hono.
 */
export function createApp(appDeps: AppDeps & { files: FileStore; localFiles: LocalFileStore; middleware?: Step[] }): SpoolApp {
  const deps = { ...appDeps, jobs: new JobService(appDeps) };
  const { config, log } = deps;
  const metrics = deps.metrics ?? new ServerMetrics(deps);
  const steps = new WorkerSteps(deps);
  const jobs = jobRoutes({ client: new ClientSteps(deps), worker: steps });

  const app = new Hono<AppEnv>();
  // What the steps found, on Hono's context for the routes that read it there.
  app.use((c, next) => {
    const call = c.env as Call;
    if (call.key) c.set("key", call.key);
    if (call.endpointId !== undefined) c.set("endpointId", call.endpointId);
    if (call.keepAdmission) c.set("keepAdmission", call.keepAdmission);
    return next();
  });
  app.route("/", jobs.routes); // a status asked as events goes on to sseRoutes
  const v2 = new Hono<AppEnv>();
  v2.route("/:endpoint", sseRoutes(deps)); // Accept: text/event-stream only; other requests go on to clientRoutes
  v2.route("/:endpoint", clientRoutes(deps));
  v2.route("/:endpoint", workerRoutes(deps, steps));
  v2.route("/:endpoint", fileUploadRoutes(deps, deps.files, steps.presence));
  v2.route("/:endpoint", scalingRoutes(deps));
  app.route("/v2", openaiRoutes(deps));
  app.route("/v2", v2);
  app.route("/files", fileDownloadRoutes(deps, deps.localFiles));
  app.route("/", metricsRoutes(deps, metrics));
  app.route("/", openapiRoutes(deps));
  app.route("/dashboard/api", dashboardApi(deps));
  const answerError = errorAnswer(log);
  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${new URL(c.req.url).pathname}` }, 404));
  app.onError((err, c) => answerError(err, c.req.raw));

  const route: Step = (call, next) => {
    const url = call.req.url;
    const start = url.indexOf("/", url.indexOf(":") + 4); // where Hono's getPath starts
    const q = url.indexOf("?", start);
    const path = q === -1 ? url.slice(start) : url.slice(start, q);
    if (path.includes("%")) call.path = getPath(call.req);
    else {
      call.path = path;
      if (jobs.match(call)) return next(call);
    }
    call.route = templateOf(app, call.req.method, call.path);
    return next(call);
  };
  const answerOpenaiError = openaiErrorAnswer(log);
  const answerThrown = (err: unknown, call: Call) => (isOpenaiPath(call.path) ? answerOpenaiError : answerError)(err, call.req);
  const own = [checkHost(new AllowedHosts(config.server)), route, countRequests(metrics, answerThrown), checkAccess(new Access(deps))];
  const end = (call: Call): Promise<Response> => {
    if (call.answer) return call.answer(call);
    const res = app.fetch(call.req, call);
    return res instanceof Promise ? res : Promise.resolve(res);
  };

  const added = [...(appDeps.middleware ?? [])];
  let run = pipeline([...added, ...own], end);
  const fetch = (req: Request, peer?: unknown) =>
    run({ req, peer, path: "", route: "unmatched", answer: undefined, key: undefined, endpointId: undefined, keepAdmission: undefined });
  const spool: SpoolApp = {
    fetch,
    request: (path, init) => fetch(new Request(new URL(path, "http://localhost").href, init)),
    use(...more) {
      added.push(...more);
      run = pipeline([...added, ...own], end);
      return spool;
    },
    routes: app.routes,
  };
  return spool;
}

/** The template of the first route (not middleware) Hono's router matches, or "unmatched". */
function templateOf(app: Hono<AppEnv>, method: string, path: string): string {
  const [matches] = app.router.match(method === "HEAD" ? "GET" : method, path);
  for (const [[, route]] of matches) if (route.method !== "ALL") return route.path;
  return "unmatched";
}
