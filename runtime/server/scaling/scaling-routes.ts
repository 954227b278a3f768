import { Hono } from "hono";
import { findEndpoint } from "../../config/config.ts";
import type { ScalingSignal } from "../../protocol/scaling-signal.ts";
import type { AppDeps, AppEnv } from "../app-deps.ts";
import { scalingSignal } from "./scaling-signal.ts";

/**
 * GET /v2/<endpoint_id>/scaling: the endpoint's scaling signal as JSON, for KEDA's metrics-api
 * scaler (valueLocation `desiredWorkers`). A read-only key may call it.
 */
export function scalingRoutes(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/scaling", async (c) => {
    const endpointId = c.get("endpointId");
    // authorize() has already answered 404 for an unknown endpoint.
    return c.json((await scalingSignal(deps, endpointId, findEndpoint(deps.config, endpointId)!)) satisfies ScalingSignal);
  });
  return app;
}
