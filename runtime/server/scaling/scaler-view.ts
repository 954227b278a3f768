import type { ScaleUpHold } from "../../protocol/job-response.ts";

/**
 * What the rest of the server reads from, and tells, this server's scaler: the workers it runs, as
 * only it knows them (the store knows a worker once it has called). /health, /metrics and the
 * scaling signal read it; worker requests tell it a worker is up. The Scaler implements it.
 */
export interface ScalerView {
  /** The origin this server's own workers call (`http://127.0.0.1:<port>`); undefined until the server listens. */
  readonly origin: string | undefined;
  /** Workers started for the endpoint and not yet heard from. */
  initializing(endpointId: string): number;
  /** Worker processes being ended (stopped, or past a job's deadline) that have not exited. */
  stopping(endpointId: string): number;
  /** Why the endpoint has fewer workers than it wants (no GPU free); undefined when it has them. */
  held(endpointId: string): ScaleUpHold | undefined;
  /** A worker of the endpoint reached the server (any worker request): it is up, and the endpoint's workers start. */
  reached(workerId: string, endpointId: string): void;
}
