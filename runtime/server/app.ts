import { Hono } from "hono";
import type { AppDeps, AppEnv } from "./app-deps.ts";
import { errorAnswer, jsonAnswer } from "./http/http-error.ts";
import { AllowedHosts } from "./http/allowed-hosts.ts";
import { JobService } from "./jobs/job-service.ts";
import { Access, authenticate, authorize } from "./http/access.ts";
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
import { jobPathRoutes } from "./routes/job-path-routes.ts";
import { sseRoutes } from "./routes/sse-routes.ts";
import { dashboardApi } from "./dashboard/dashboard-api.ts";
import { scalingRoutes } from "./scaling/scaling-routes.ts";

const SLASH = 47;
const noHost = () => jsonAnswer({ error: "the request has no valid Host header" }, 400);

/** A step every request passes, the job path's included, before a route answers it. */
export type RequestMiddleware = (req: Request, next: (req: Request) => Promise<Response>) => Promise<Response>;

/**
 * Builds the Hono app of the queue server without listening; only `serve` calls Bun.serve. Every
 * route is registered here, once: the job path's (routes/job-path-routes.ts), which make their
 * own checks, then the rest behind Hono middleware. Whatever every request must pass (a CORS
 * answer, a request id, an access log) goes in `middleware`, which wraps the app's fetch and so
 * every route.
 */
export function createApp(
  appDeps: AppDeps & { files: FileStore; localFiles: LocalFileStore; middleware?: RequestMiddleware[] },
): Hono<AppEnv> {
  const deps = { ...appDeps, jobs: new JobService(appDeps) };
  const { config, log } = deps;
  const metrics = deps.metrics ?? new ServerMetrics(deps);
  const access = new Access(deps);
  const steps = new WorkerSteps(deps);
  const clientSteps = new ClientSteps(deps);
  const answerError = errorAnswer(log);

  // The job path's routes first: they make the middleware's checks themselves (and most of their
  // requests are matched before Hono's router, by jobPath.match). A status asked as events goes
  // on, through the middleware, to the SSE route.
  const jobPath = jobPathRoutes(deps, access, { client: clientSteps, worker: steps }, metrics);
  const app = new Hono<AppEnv>();
  app.route("/", jobPath.routes);

  // Every other route, behind the Hono middleware that counts, authenticates and authorizes.
  app.use(countRequests(metrics));
  const v2 = new Hono<AppEnv>();
  // Authentication comes first, so an unknown key learns nothing about jobs or endpoints here
  // (the public /openapi.json does list the endpoints and their inputs).
  v2.use(authenticate(deps, access));
  v2.use("/:endpoint/*", authorize(deps, access));
  v2.route("/:endpoint", sseRoutes(deps)); // Accept: text/event-stream only; other requests go on to clientRoutes
  v2.route("/:endpoint", clientRoutes(deps));
  v2.route("/:endpoint", workerRoutes(deps, steps));
  v2.route("/:endpoint", fileUploadRoutes(deps, deps.files, steps.presence));
  v2.route("/:endpoint", scalingRoutes(deps));
  app.route("/v2", openaiRoutes(deps, access)); // before v2: its own auth, so that errors take OpenAI's shape
  app.route("/v2", v2);
  app.route("/files", fileDownloadRoutes(deps, deps.localFiles));
  app.route("/", metricsRoutes(deps, metrics));
  app.route("/", openapiRoutes(deps));
  app.route("/dashboard/api", dashboardApi(deps));
  app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${new URL(c.req.url).pathname}` }, 404));
  app.onError((err, c) => answerError(err, c.req.raw));

  const routed = app.fetch;
  const hosts = new AllowedHosts(config.server);
  // Bun gives a request without a usable Host header its path alone as URL, which no route (and
  // no job origin) can be read from: HTTP/1.1 answers such a request 400. A host this server does
  // not answer for (server.allowedHosts) is a 400 too, on every route, before the job path's.
  // `env` is what Bun.serve passes beside the request: the peer's address comes from it.
  const route = (req: Request, env: unknown, ctx: unknown) => {
    if (req.url.charCodeAt(0) === SLASH) return noHost();
    const checked = hosts.check(req, env);
    if (checked instanceof Response) return checked;
    return jobPath.match(checked) ?? routed(checked, env as never, ctx as never);
  };
  const chain = appDeps.middleware ?? [];
  app.fetch = !chain.length
    ? route
    : (req, env, ctx) => {
        const through =
          (i: number) =>
          (r: Request): Promise<Response> =>
            i < chain.length ? chain[i]!(r, through(i + 1)) : Promise.resolve(route(r, env, ctx));
        return through(0)(req);
      };
  return app;
}
