import type { Clock } from "../clock.ts";
import type { Config } from "../config/config.ts";
import type { Log } from "../log.ts";
import type { ScaleUpHold } from "../protocol/job-response.ts";
import type { InputSchemas } from "./jobs/input-schemas.ts";
import type { JobEvents } from "./jobs/job-events.ts";
import type { JobService } from "./jobs/job-service.ts";
import type { EndpointStatsRecorder } from "./metrics/endpoint-stats.ts";
import type { ServerMetrics } from "./metrics/server-metrics.ts";
import type { WorkerKeys } from "./keys/worker-keys.ts";
import type { StartFailures } from "./scaling/start-failures.ts";
import type { WorkerLogBook } from "./scaling/worker-log-book.ts";
import type { ApiKeyRecord, Store } from "./store/store.ts";
import type { Resolver } from "./jobs/webhook-address.ts";

/** What the Hono app is built from; tests pass their own clock, config and store. */
export interface AppDeps {
  store: Store;
  config: Config;
  clock: Clock;
  log: Log;
  /** What happens to jobs on this server (stats, metrics, dashboard listen here). */
  jobEvents: JobEvents;
  /** Recent per-endpoint figures (throughput, delay and execution percentiles), fed by jobEvents. */
  stats: EndpointStatsRecorder;
  /** Prometheus metrics of this server (the app makes its own when none is given). */
  metrics?: ServerMetrics;
  /** Workers the scaler has started and not yet heard from, per endpoint. */
  initializing?: (endpointId: string) => number;
  /** Worker processes the scaler is ending and that have not exited, per endpoint. */
  stopping?: (endpointId: string) => number;
  /** Why the scaler holds a scale-up of the endpoint (no GPU free); undefined when it does not. */
  held?: (endpointId: string) => ScaleUpHold | undefined;
  /** Input schemas of endpoints whose handler the server can import (400 at submission). */
  inputSchemas?: InputSchemas;
  /** Workers that fail to start, per endpoint: /health shows it, submissions are refused at the limit. */
  startFailures?: StartFailures;
  /** Told of every worker request, so the scaler knows its workers are up (and the endpoint's workers start). */
  workerSeen?: (workerId: string, endpointId: string) => void;
  /** How webhook hosts are looked up, at submission and before each call (the system's resolver by default). */
  resolver?: Resolver;
  /**
   * The origin this server's own workers call (`http://127.0.0.1:<port>`), set once it listens:
   * a job submitted through it records no origin, and its file URLs are built on it.
   */
  local?: { origin?: string };
  /** The keys of the workers this server starts (held in memory, never stored). */
  workerKeys?: WorkerKeys;
  /** The last lines about the workers this server started (start, exit, error output), per endpoint. */
  workerLog?: WorkerLogBook;
}

/** What routes are built from: the app's deps and the one job path. */
export type RouteDeps = AppDeps & { jobs: JobService };

/** Values the middleware puts on each request's context. */
export interface AppEnv {
  Variables: {
    key: ApiKeyRecord;
    endpointId: string;
    /**
     * For a response that streams on after the handler returns (SSE): takes over the request's
     * concurrency slot, returning the function that gives it back when the stream ends.
     */
    keepAdmission?: () => () => void | Promise<void>;
  };
}
