import { basename, resolve } from "node:path";
import { systemClock } from "../clock.ts";
import { loadConfig } from "../config/config.ts";
import { stderrLog } from "../log.ts";
import { createKey } from "../server/keys/api-keys.ts";
import { startServer } from "../server/serve.ts";
import { loadHandler } from "../worker/handler-loader.ts";
import { selfCommand } from "../worker/supervisor.ts";
import { openStore } from "./open-store.ts";

/**
 * `spool dev <handler.ts> [--port 8080] [--data .data-dev] [--endpoint ID]`: the real queue server
 * on the embedded store plus one worker process for the handler, so /run, /status and /stream
 * behave locally exactly as in production.
 */
export async function devCommand(positionals: string[], values: { port?: string; data?: string; endpoint?: string }): Promise<number> {
  const target = positionals[0];
  if (!target) {
    console.error("usage: spool dev <handler.ts> [--port 8080] [--data DIR] [--endpoint ID]");
    return 2;
  }
  await loadHandler(target);
  const endpoint =
    values.endpoint ??
    basename(target)
      .replace(/\.[^.]+$/, "")
      .replace(/[^A-Za-z0-9_-]/g, "-");
  const config = await loadConfig();
  // An absolute path: the server imports it for its input schema (400 at submission, the dashboard form).
  config.endpoints = { [endpoint]: { ...config.endpoints.echo!, handler: resolve(target) } };
  config.server.port = values.port === undefined ? 8080 : Number(values.port);
  config.server.data = values.data ?? ".data-dev";
  const store = await openStore(config);
  // dev keeps one key of its own so that the worker and the user share it across restarts.
  const { key } = await createKey(store, `dev-${systemClock.now()}`, systemClock.now());
  const server = startServer({ config, store, log: stderrLog });
  const worker = Bun.spawn(selfCommand(["worker", target, "--url", server.url, "--endpoint", endpoint, "--api-key", key]), {
    stdio: ["ignore", "inherit", "inherit"],
  });
  console.log(`Spool dev: ${server.url}/v2/${endpoint} with a worker for ${target}; dashboard: ${server.url}/dashboard`);
  console.log(`API key for this dev server:\n${key}`);
  const stop = async () => {
    worker.kill("SIGTERM");
    await worker.exited;
    await server.stop();
    await store.revokeKey(key, systemClock.now());
    await store.close();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  return -1;
}
