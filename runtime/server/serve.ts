import { systemClock, type Clock } from "../clock.ts";
import type { Config } from "../config/config.ts";
import { stderrLog, type Log } from "../log.ts";
import { createApp } from "./app.ts";
import { LocalFileStore } from "./files/file-store.ts";
import { startMaintenance } from "./maintenance.ts";
import { startWebhookSender } from "./webhooks/webhook-sender.ts";
import { webhookSecret } from "./webhooks/webhook-signature.ts";
import { createStore } from "./store/create-store.ts";
import type { Store } from "./store/store.ts";

export interface RunningServer {
  url: string;
  config: Config;
  port: number;
  store: Store;
  /** Runs the housekeeping duties once, now. */
  sweep: () => Promise<void>;
  stop: () => Promise<void>;
}

/** Opens the store (unless given), starts the housekeeping loop and listens with Bun.serve. */
export function startServer(options: { config: Config; store?: Store; clock?: Clock; log?: Log }): RunningServer {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const log = options.log ?? stderrLog;
  const store =
    options.store ??
    createStore(config.server.data, {
      retention: { syncMs: config.server.syncRetentionMs, asyncMs: config.server.asyncRetentionMs },
    });
  const files = new LocalFileStore(config.server.data, config.server.fileUrlTtlMs);
  const deps = { store, config, clock, log, files };
  const app = createApp(deps);
  const maintenance = startMaintenance(deps);
  const webhooks = startWebhookSender({ ...deps, secret: webhookSecret(config) });
  const server = Bun.serve({
    port: config.server.port,
    hostname: config.server.host,
    fetch: app.fetch,
    // Long-polls (runsync up to 300 s, job-take) must not be cut by the idle timer.
    idleTimeout: 0,
    // Routes enforce their own limits (413 with a JSON error) while streaming the body in;
    // this is only the outer bound past which Bun itself refuses.
    maxRequestBodySize: 1024 * 1024 * 1024,
  });
  const host = config.server.host === "0.0.0.0" ? "127.0.0.1" : config.server.host;
  return {
    url: `http://${host}:${server.port}`,
    config,
    port: server.port!,
    store,
    sweep: maintenance.sweep,
    stop: async () => {
      await server.stop(true);
      await maintenance.stop();
      await webhooks.stop();
      if (!options.store) await store.close();
    },
  };
}
