import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock, systemClock, type Clock } from "../../runtime/clock.ts";
import { parseConfig, type ConfigInput } from "../../runtime/config/config.ts";
import type { GpuDevice } from "../../runtime/config/gpus.ts";
import { silentLog, type Log } from "../../runtime/log.ts";
import { JobEvents } from "../../runtime/server/jobs/job-events.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import type { Resolver } from "../../runtime/server/jobs/webhook-address.ts";
import type { WorkerProvider } from "../../runtime/server/scaling/worker-provider.ts";
import { startServer, type RunningServer } from "../../runtime/server/serve.ts";
import { createStore } from "../../runtime/server/store/create-store.ts";
import type { Store } from "../../runtime/server/store/store.ts";
import { until } from "./until.ts";

export interface TestServerOptions {
  /** Server settings merged over short test defaults. */
  server?: NonNullable<ConfigInput["server"]>;
  endpoints?: NonNullable<ConfigInput["endpoints"]>;
  /** A ManualClock to drive time; the wall clock otherwise. */
  clock?: Clock;
  log?: Log;
  /** Where the scaler starts workers; local processes by default. */
  provider?: WorkerProvider;
  /** How the server looks webhook hosts up. */
  resolver?: Resolver;
  /** The store to serve (closed with the server); a fresh SQLite store in the temp dir by default. */
  store?: Store;
  /** The config file the server says it was read from (its workers must not read it). */
  configFile?: string;
  /**
   * Whether webhooks to loopback are allowed, so the tests' receivers are reached; false leaves
   * the webhook settings at the server's defaults. @default true
   */
  loopbackWebhooks?: boolean;
  /** The GPUs the machine lists (nvidia-smi at config load); none by default, whatever this machine has. */
  detectGpus?: () => GpuDevice[];
}

export interface TestServer extends AsyncDisposable {
  url: string;
  key: string;
  store: Store;
  /** The server's job events, for tests to listen to. */
  jobEvents: JobEvents;
  clock: Clock;
  dataDir: string;
  server: RunningServer;
  /** Sleepers on a manual clock that belong to the server itself (its housekeeping loop). */
  baseSleepers: number;
  /** fetch against the server with the key as Bearer; `auth: null` sends none. */
  call(method: string, path: string, body?: unknown, init?: { auth?: string | null; headers?: Record<string, string> }): Promise<Response>;
  /** call() and parse the JSON body, returning [status, body]. */
  json<T = any>(method: string, path: string, body?: unknown, init?: { auth?: string | null }): Promise<[number, T]>;
}

/** A real queue server on a loopback port, on a fresh SQLite store in a temp dir (or the store given). */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "spool-test-"));
  const clock = options.clock ?? systemClock;
  const config = parseConfig(
    {
      server: {
        port: 0,
        host: "127.0.0.1",
        data: dataDir,
        // Empty long-polls answer at once unless a test parks one on purpose (and then it ends
        // on an event, never on time passing).
        takeWaitMs: 0,
        stopWaitMs: 0,
        streamWaitMs: 0,
        // Housekeeping runs when a test calls sweep(), after moving its clock.
        sweepIntervalMs: 3_600_000,
        // Test receivers listen on loopback.
        ...(options.loopbackWebhooks === false ? {} : { webhookAllow: ["127.0.0.1", "::1"] }),
        // GPU locks of this server alone, unless a test shares a folder between servers.
        gpuLockDir: join(dataDir, "gpu-locks"),
        ...options.server,
      },
      // Tests that are not about limits read /requests freely; the limit tests set their own.
      endpoints: options.endpoints ?? { echo: { rateLimits: { requests: { requests: 1_000_000 } } } },
    },
    "config",
    { detectGpus: options.detectGpus ?? (() => []) },
  );
  if (options.configFile) config.configFile = options.configFile;
  const store =
    options.store ??
    (await createStore(dataDir, {
      retention: { syncMs: config.server.syncRetentionMs, asyncMs: config.server.asyncRetentionMs },
    }));
  const { key } = await createKey(store, "test", clock.now());
  const jobEvents = new JobEvents((err) => {
    throw err;
  });
  const server = startServer({
    config,
    store,
    clock,
    log: options.log ?? silentLog,
    jobEvents,
    provider: options.provider,
    resolver: options.resolver,
  });
  await server.ready;
  // The server's own loops (housekeeping, webhook sender, and the scaler when an endpoint names
  // a handler) each park one sleep on a manual clock. Wait until all of them have, however
  // slowly they start, so that parked() counts only requests beyond them.
  let baseSleepers = 0;
  if (clock instanceof ManualClock) {
    const ownLoops = 2 + (server.scaler.endpoints.length ? 1 : 0);
    await until(() => clock.sleeping >= ownLoops, `the server's ${ownLoops} own loops to sleep on the clock`);
    baseSleepers = clock.sleeping;
  }

  const call: TestServer["call"] = (method, path, body, init) => {
    const auth = init?.auth === undefined ? `Bearer ${key}` : init.auth;
    const headers: Record<string, string> = { ...init?.headers };
    if (auth !== null) headers.authorization = auth;
    return fetch(`${server.url}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  };
  return {
    url: server.url,
    key,
    store,
    jobEvents,
    clock,
    dataDir,
    server,
    baseSleepers,
    call,
    async json(method, path, body, init) {
      const res = await call(method, path, body, init);
      const text = await res.text();
      return [res.status, text ? JSON.parse(text) : undefined];
    },
    async [Symbol.asyncDispose]() {
      await server.stop();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Resolves once `n` long-polls are parked on the server's manual clock, beyond the sleep of
 * its housekeeping loop, so that a test moves time only after the request is waiting.
 */
export async function parked(srv: TestServer, n = 1): Promise<void> {
  const clock = srv.clock as ManualClock;
  const want = srv.baseSleepers + n;
  // Bounded by a deadline, not by a count of event-loop turns: on a loaded machine the request
  // can need many more turns than usual to reach the server and park.
  await until(() => clock.sleeping >= want, `${n} long-poll(s) parked on the clock (beyond the server's own ${srv.baseSleepers})`);
}
