import { Hono } from "hono";
import { authenticate, type AccessDeps } from "../http/access.ts";
import type { AppEnv } from "../http/app-env.ts";
import { HttpError } from "../http/http-error.ts";
import type { Call, Step } from "../http/pipeline.ts";
import type { ScrapeReads, ServerMetrics } from "./server-metrics.ts";

const METHODS = new Set(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]);

/**
 * Counts every answered request by method, route template and status. The template is the one
 * the route step found (e.g. /v2/:endpoint/status/:id, whatever the id), or "unmatched": the
 * label set stays bounded whatever paths clients send. An error thrown by the steps after it or
 * the route is answered here first (`answerError`), so that it is counted with its status.
 */
export function countRequests(metrics: ServerMetrics, answerError: (err: unknown, call: Call) => Response): Step {
  return async (call, next) => {
    let res: Response;
    try {
      res = await next(call);
    } catch (err) {
      res = answerError(err, call);
    }
    const method = call.req.method;
    metrics.httpRequest(METHODS.has(method) ? method : "OTHER", call.route, res.status);
    return res;
  };
}

/**
 * GET /metrics in the Prometheus text format. Needs a full or read-only key that is not limited
 * to some endpoints (it shows them all), unless server.metricsPublic is set.
 */
export function metricsRoutes(deps: AccessDeps & ScrapeReads, metrics: ServerMetrics): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  if (!deps.config.server.metricsPublic) {
    app.use("/metrics", authenticate(deps), async (c, next) => {
      const key = c.get("key");
      if (key.scope !== "full" && key.scope !== "read-only")
        throw new HttpError(401, `this API key is a ${key.scope} key; /metrics needs a full or read-only key`);
      if (key.endpoints)
        throw new HttpError(
          401,
          "this API key is restricted to some endpoints; /metrics shows every endpoint and needs an unrestricted key",
        );
      await next();
    });
  }
  app.get("/metrics", async (c) => c.body(await metrics.exposition(deps), 200, { "content-type": metrics.contentType }));
  return app;
}
