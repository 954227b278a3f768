import { Hono } from "hono";
import { findEndpoint } from "../../config/config.ts";
import type { ScalingSignal } from "../../protocol/scaling-signal.ts";
import type { AppEnv } from "../http/app-env.ts";
import { scalingSignal, type SignalDeps } from "./scaling-signal.ts";

/**
 * GET /v2/<endpoint_id>/scaling: the endpoint's scaling signal as JSON, for KEDA's metrics-api
 * scaler (valueLocation `desiredWorkers`). A read-only key may call it.
 */
export function scalingRoutes(deps: SignalDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/scaling", async (c) => {
    const endpointId = c.get("endpointId");
    // The access step has already answered 404 for an unknown endpoint.
    return c.json((await scalingSignal(deps, endpointId, findEndpoint(deps.config, endpointId)!)) satisfies ScalingSignal);
  });
  return app;
}
