import { systemClock } from "../clock.ts";
import { ConfigError, loadConfig, type Config } from "../config/config.ts";
import { stderrLog } from "../log.ts";
import { createKey } from "../server/keys/api-keys.ts";
import { startServer } from "../server/serve.ts";
import { isCompiled, isHandlerSource } from "../executable.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import { openStore } from "./open-store.ts";
import { guardProcess } from "./process-guard.ts";
import { startTracing, stopTracing } from "../telemetry/tracing.ts";

/** `spool serve [--port N] [--data DIR] [--config FILE]` */
export async function serveCommand(flags: { port?: string; data?: string; config?: string; store?: string }): Promise<void> {
  const config = await loadConfig(flags.config);
  if (isCompiled()) refuseSourceHandlers(config, flags.config);
  if (flags.port !== undefined) config.server.port = Number(flags.port);
  if (flags.data !== undefined) config.server.data = flags.data;
  if (flags.store !== undefined) config.server.store = flags.store;
  // Before the store opens: a second server on this directory stops here, having touched nothing.
  const lock = lockDataDir(config.server.data);
  guardProcess(stderrLog);
  const store = await openStore(config);
  // Before the first request: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT turns traces on.
  await startTracing({ service: "spool-server", log: stderrLog });

  if ((await store.listKeys()).length === 0) {
    const { key } = await createKey(store, "default", systemClock.now());
    console.log(`No API keys yet; created one named "default". It is shown only this once:\n\n  ${key}\n`);
  }

  const server = startServer({ config, store, log: stderrLog });
  console.log(`Spool listening on ${server.url} (store: ${config.server.store ?? config.server.data}); dashboard: ${server.url}/dashboard`);
  for (const id of Object.keys(config.endpoints)) console.log(`  endpoint ${id}: ${server.url}/v2/${id}`);
  if (config.server.host === "0.0.0.0")
    console.log(`  host 0.0.0.0: reachable on every address of this machine (server.host = "127.0.0.1" keeps it local)`);

  let stopping = false;
  const shutdown = async () => {
    if (stopping) {
      // Asked twice: whoever sent it will not wait for the drain. The workers are ended with the server.
      console.error("spool: stopping now, without waiting for workers to drain");
      server.scaler.kill();
      process.exit(1);
    }
    stopping = true;
    if (server.scaler.endpoints.length)
      console.error("spool: stopping; workers drain their jobs first (send the signal again to stop now)");
    await server.stop();
    await store.close();
    await stopTracing();
    lock.release();
    process.exit(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}

/**
 * A compiled server carries no Bun toolchain for handler sources (nor their packages): each
 * endpoint's handler must be a built worker (`spool build <handler>`) or absent (outside workers).
 */
function refuseSourceHandlers(config: Config, configPath: string | undefined): void {
  const built = "build a worker with `spool build <handler.ts> --outfile BINARY` and set the endpoint's handler to the binary";
  if (configPath === undefined) {
    throw new ConfigError(
      `a compiled server runs built workers, and the built-in config's endpoints run handlers from source: pass --config FILE (${built}, or leave handler out for workers that connect themselves)`,
    );
  }
  for (const [id, ep] of Object.entries(config.endpoints)) {
    if (ep.handler && isHandlerSource(ep.handler)) {
      throw new ConfigError(
        `${configPath}: endpoint ${id}: a compiled server runs built workers, not handler sources (${ep.handler}): ${built}`,
      );
    }
  }
}
