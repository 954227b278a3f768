import { systemClock, type Clock } from "../clock.ts";
import { resolve } from "node:path";
import { ConfigError, startsWorkers, type Config } from "../config/config.ts";
import { stderrLog, type Log } from "../log.ts";
import { createApp } from "./app.ts";
import { dashboardPages } from "./dashboard/dashboard-pages.ts";
import { LocalFileStore } from "./files/file-store.ts";
import { S3FileStore } from "./files/s3-file-store.ts";
import { startMaintenance } from "./jobs/maintenance.ts";
import { InputSchemas } from "./jobs/input-schemas.ts";
import { JobEvents } from "./jobs/job-events.ts";
import { WorkerKeys } from "./keys/worker-keys.ts";
import { sandboxMode } from "../process/sandbox.ts";
import { EndpointStatsRecorder } from "./metrics/endpoint-stats.ts";
import { ServerMetrics } from "./metrics/server-metrics.ts";
import { LocalProcessProvider } from "./scaling/local-process-provider.ts";
import { WorkerLogBook } from "./scaling/worker-log-book.ts";
import { stopList } from "./jobs/stop-list.ts";
import { Scaler } from "./scaling/scaler.ts";
import { StartFailures } from "./scaling/start-failures.ts";
import type { WorkerProvider } from "./scaling/worker-provider.ts";
import { startWebhookSender } from "./webhooks/webhook-sender.ts";
import { webhookSecret } from "./webhooks/webhook-signature.ts";
import type { Resolver } from "./jobs/webhook-address.ts";
import { openEmbeddedStore, storeOptions, storeUrl } from "./store/create-store.ts";
import type { Store } from "./store/store.ts";

/**
 * How long one wait of the provider on a worker's stop list lasts (it ends sooner on a cancel).
 * These waits run on the system clock: they bound a wait on another process, not server time.
 */
const RELAY_WAIT_MS = 60_000;

export interface RunningServer {
  url: string;
  scaler: Scaler;
  /** The keys of the workers the scaler runs now. */
  workerKeys: WorkerKeys;
  /** How the workers it starts are confined. */
  sandbox: "bubblewrap" | "none";
  /** Resolves once the scaler has started (at once when nothing is scaled). */
  ready: Promise<void>;
  config: Config;
  port: number;
  store: Store;
  jobEvents: JobEvents;
  /** Recent per-endpoint figures of this server. */
  stats: EndpointStatsRecorder;
  /** Runs the housekeeping duties once, now. */
  sweep: () => Promise<void>;
  stop: () => Promise<void>;
}

/** Opens the store (unless given), starts the housekeeping loop and listens with Bun.serve. */
export function startServer(options: {
  config: Config;
  store?: Store;
  clock?: Clock;
  log?: Log;
  /** Where the job events of this server go (a fresh emitter by default). */
  jobEvents?: JobEvents;
  /** Where the scaler starts workers; local processes by default. */
  provider?: WorkerProvider;
  /** How webhook hosts are looked up (the system's resolver by default). */
  resolver?: Resolver;
}): RunningServer {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const log = options.log ?? stderrLog;
  const store = options.store ?? openEmbeddedStore(storeUrl(config), storeOptions(config));
  const localFiles = new LocalFileStore(config.server.data, config.server.fileUrlTtlMs);
  const files = config.server.files ? new S3FileStore(config.server.files) : localFiles;
  const jobEvents = options.jobEvents ?? new JobEvents((err) => log.error("job event listener failed", { error: String(err) }));
  const stats = new EndpointStatsRecorder(jobEvents, clock);
  const metrics = new ServerMetrics({ store, config, clock, jobEvents });
  const startFailures = new StartFailures({ store, config, clock, log, jobEvents, metrics });
  const workerKeys = new WorkerKeys();
  const workerLog = new WorkerLogBook();
  const serverId = `server-${crypto.randomUUID().slice(0, 8)}`;
  const sandbox = localSandbox(config, log);
  const provider =
    options.provider ??
    new LocalProcessProvider({
      log,
      killGraceMs: config.server.killGraceMs,
      stopsFor: stopList(store, systemClock, RELAY_WAIT_MS),
      sandbox: sandbox.hidden && { hidden: sandbox.hidden },
      onOutput: (ep, id, line) => workerLog.add(ep, id, line, clock.now()),
    });
  const scaler = new Scaler({ store, config, clock, log, metrics, startFailures, workerKeys, workerLog }, provider, serverId);
  const inputSchemas = new InputSchemas(config, log);
  inputSchemas.warm();
  // How this server's own workers are confined (unknown for a provider given by the caller).
  const confinement = options.provider ? undefined : sandbox.mode;
  const deps = {
    store,
    config,
    clock,
    log,
    jobEvents,
    stats,
    metrics,
    startFailures,
    workerKeys,
    workerLog,
    scaler,
    files,
    localFiles,
    inputSchemas,
    resolver: options.resolver,
    sandbox: confinement,
  };
  const app = createApp(deps);
  const server = listen(config, {
    fetch: app.fetch,
    // The dashboard page, bundled by Bun from its sources (its data comes through app.fetch).
    routes: dashboardPages,
    development: false,
    // Long-polls (runsync up to 300 s, job-take) must not be cut by the idle timer.
    idleTimeout: 0,
    // Routes enforce their own limits (413 with a JSON error) while streaming the body in;
    // this is only the outer bound past which Bun itself refuses.
    maxRequestBodySize: 1024 * 1024 * 1024,
  });
  const maintenance = startMaintenance({ ...deps, serverId });
  const webhooks = startWebhookSender({ ...deps, secret: webhookSecret(config) });
  const host = config.server.host === "0.0.0.0" ? "127.0.0.1" : config.server.host;
  const url = `http://${host}:${server.port}`;
  scaler.listening(url);
  const scaling = scaler.endpoints.length ? startScaling(scaler, store, clock) : Promise.resolve();
  return {
    url,
    scaler,
    workerKeys,
    sandbox: sandbox.mode,
    ready: scaling,
    config,
    port: server.port!,
    store,
    jobEvents,
    stats,
    sweep: maintenance.sweep,
    stop: async () => {
      await scaling;
      await scaler.stop(); // workers drain while the server still answers them
      await server.stop(true);
      await maintenance.stop();
      await webhooks.stop();
      stats.close();
      metrics.close();
      startFailures.close();
      if (!options.store) await store.close();
    },
  };
}

/**
 * Each worker the scaler starts gets a key of its own, held in this server's memory (WorkerKeys).
 * Stored keys that servers before that one made for their scaler, and that one killed with
 * SIGKILL never revoked, are revoked here.
 */
async function startScaling(scaler: Scaler, store: Store, clock: Clock): Promise<void> {
  for (const key of await store.listKeys()) {
    if (key.scope === "worker" && key.revokedAt === undefined && /^scaler-server-[0-9a-f]{8}$/.test(key.name))
      await store.revokeKey(key.id, clock.now());
  }
  scaler.start();
}

/**
 * How this server confines the workers it starts (server.sandbox): in bubblewrap, where they
 * cannot see the data dir or the config file; where that is not possible, it says so once.
 */
function localSandbox(config: Config, log: Log): { mode: "bubblewrap" | "none"; hidden?: string[] } {
  let mode: "bubblewrap" | "none";
  try {
    mode = sandboxMode(config.server.sandbox);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  if (mode === "none") {
    if (config.server.sandbox === "auto" && Object.values(config.endpoints).some((ep) => startsWorkers(config, ep))) {
      log.warn(
        "bubblewrap (bwrap) is not available: handlers run with this server's rights and can read its data dir; install the bubblewrap package to confine them",
      );
    }
    return { mode };
  }
  const hidden = [resolve(config.server.data), ...(config.configFile ? [resolve(config.configFile)] : [])];
  return { mode, hidden };
}

/**
 * Bun.serve on the configured port, alone: without reusePort: false, Bun binds a port another
 * process already listens on, and the kernel then splits requests between the two servers.
 */
function listen(config: Config, options: Omit<Parameters<typeof Bun.serve>[0], "port" | "hostname" | "reusePort">) {
  try {
    return Bun.serve({ ...options, port: config.server.port, hostname: config.server.host, reusePort: false } as Parameters<
      typeof Bun.serve
    >[0]);
  } catch (err) {
    if ((err as { code?: string }).code !== "EADDRINUSE") throw err;
    throw new ConfigError(
      `port ${config.server.port} on ${config.server.host} is in use by another process: stop it, or give this server another --port`,
    );
  }
}
