import type { Clock } from "../clock.ts";
import type { Config } from "../config/config.ts";
import type { Log } from "../log.ts";
import type { InputSchemas } from "./jobs/input-schemas.ts";
import type { JobEvents } from "./jobs/job-events.ts";
import type { JobService } from "./jobs/job-service.ts";
import type { Resolver } from "./jobs/webhook-address.ts";
import type { EndpointStatsRecorder } from "./metrics/endpoint-stats.ts";
import type { ServerMetrics } from "./metrics/server-metrics.ts";
import type { WorkerKeys } from "./keys/worker-keys.ts";
import type { ScalerView } from "./scaling/scaler-view.ts";
import type { StartFailures } from "./scaling/start-failures.ts";
import type { WorkerLogBook } from "./scaling/worker-log-book.ts";
import type { Store } from "./store/store.ts";

// The routes take both from here: the request context's values are http/'s.
export type { AppEnv } from "./http/app-env.ts";

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
  /** This server's scaler: the workers it runs, and the origin they call (none in tests that build the app alone). */
  scaler?: ScalerView;
  /** Input schemas of endpoints whose handler the server can import (400 at submission). */
  inputSchemas?: InputSchemas;
  /** Workers that fail to start, per endpoint: /health shows it, submissions are refused at the limit. */
  startFailures?: StartFailures;
  /** How webhook hosts are looked up, at submission and before each call (the system's resolver by default). */
  resolver?: Resolver;
  /** The keys of the workers this server starts (held in memory, never stored). */
  workerKeys?: WorkerKeys;
  /** How the workers this server starts are confined ("none": its handlers run with its rights). */
  sandbox?: "bubblewrap" | "none";
  /** The last lines about the workers this server started (start, exit, error output), per endpoint. */
  workerLog?: WorkerLogBook;
}

/** What routes are built from: the app's deps and the one job path. */
export type RouteDeps = AppDeps & { jobs: JobService };
