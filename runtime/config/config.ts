import { dirname, resolve } from "node:path";
import { z } from "zod";
import { LIMITS, LONG_POLL_MAX_MS, RATE_LIMITS, type RateLimitedOperation } from "../protocol/limits.ts";
import { describeIssues, s3ConfigSchema } from "../protocol/job-request.ts";
import defaultToml from "./default.toml" with { type: "text" };
import { detectGpus, gpuCapacity, gpuLabel, gpusSchema, namesIndexes, resolveGpus, type GpuDevice, type GpuNeed } from "./gpus.ts";
import { allowedHostsSchema, trustedProxiesSchema } from "./network-settings.ts";

const opLimit = (op: RateLimitedOperation) =>
  z
    .strictObject({
      /** Requests per window (rateWindowMs, 10 s). */
      requests: z.number().int().min(1),
      /** Requests in flight at once; none when unset. */
      concurrent: z.number().int().min(1).optional(),
    })
    .default(RATE_LIMITS[op]);

/** Per-operation limits of an endpoint; the specification's numbers by default. */
const rateLimitsSchema = z
  .strictObject({
    runsync: opLimit("runsync"),
    run: opLimit("run"),
    status: opLimit("status"),
    stream: opLimit("stream"),
    cancel: opLimit("cancel"),
    "purge-queue": opLimit("purge-queue"),
    openai: opLimit("openai"),
    requests: opLimit("requests"),
  })
  .default(RATE_LIMITS);
export type RateLimits = z.infer<typeof rateLimitsSchema>;

/** Settings of one endpoint (RunPod's endpoint settings; wire-compat.md). */
export const endpointConfigSchema = z.strictObject({
  /** @default 0 */
  workersMin: z.number().int().min(0).default(0),
  /**
   * Set at config load when absent (withFleetDefaults): 3, or for a model endpoint (options.device
   * set) as many workers as the GPUs hold (1 on a CPU host or device).
   */
  workersMax: z.number().int().min(0).optional(),
  /** Seconds an idle worker above workersMin lives. @default 5 */
  idleTimeout: z.number().int().min(1).max(3600).default(5),
  /** Milliseconds; a job's policy.executionTimeout overrides it. @default 600000 */
  executionTimeout: z
    .number()
    .int()
    .gt(LIMITS.executionTimeoutMinExclusive)
    .max(LIMITS.executionTimeoutMax)
    .default(LIMITS.executionTimeoutDefault),
  /** @default "QUEUE_DELAY" */
  scalerType: z.enum(["QUEUE_DELAY", "REQUEST_COUNT"]).default("QUEUE_DELAY"),
  /** Seconds of queue delay (QUEUE_DELAY) or jobs per worker (REQUEST_COUNT). @default 4 */
  scalerValue: z.number().int().min(1).default(4),
  /** Handler file or built binary that the scaler starts workers from. */
  handler: z.string().optional(),
  /**
   * Longest a worker may take from its start to its first request to the server; one not ready by
   * then is ended and counts as a failed start. Set at config load when absent (withFleetDefaults):
   * 600000 for a model endpoint (its setup loads weights, which takes minutes), else 120000.
   */
  startTimeoutMs: z
    .number()
    .int()
    .min(1)
    .max(24 * 3600_000)
    .optional(),
  /** Consecutive failed worker starts (exit before ready) after which onStartFailure applies. @default 5 */
  startFailureLimit: z.number().int().min(1).default(5),
  /**
   * How long workers must have failed to start, with none ready, before onStartFailure applies
   * to failures that may pass (a setup that throws, a crash, a start timeout); a handler that
   * cannot load at all applies it at once. @default 300000
   */
  startFailureWindowMs: z.number().int().min(0).default(300_000),
  /**
   * At startFailureLimit failed starts over startFailureWindowMs, or at the first that cannot
   * pass: "fail" ends queued jobs FAILED with the start error and answers new submissions 503
   * until a worker starts; "queue" keeps them waiting (weights still downloading).
   * @default "fail"
   */
  onStartFailure: z.enum(["fail", "queue"]).default("fail"),
  /** Who starts this endpoint's workers; server.provider when unset. */
  provider: z.enum(["local", "external"]).optional(),
  /** GPUs each worker gets to itself. @default 1 when options.device is "cuda", else 0 */
  gpusPerWorker: z.number().int().min(0).optional(),
  /**
   * Memory (MiB) one worker needs on each of its GPUs: workers share a GPU while their figures fit
   * its memory. Unset: a worker has its GPUs to itself.
   */
  gpuMemoryMb: z.number().int().min(1).optional(),
  /**
   * Longest an OpenAI-compatible request waits for its job's result (or, streaming, its first
   * token) before it is cancelled and answered 503 (no worker took it) or 504 (not done in time).
   * @default 90000 (as /runsync)
   */
  openaiWaitMs: z.number().int().min(1_000).max(LIMITS.runsyncWaitMax).default(LIMITS.runsyncWaitDefault),
  /**
   * Hosts a job's s3Config.endpointUrl may name (host or host:port); any host when unset. Workers
   * write a job's files to that host from their own network.
   */
  s3Hosts: z.array(z.string().min(1)).optional(),
  /** Settings handed to the handler (a model path, a device, prices), checked by its own schema. */
  options: z.record(z.string(), z.unknown()).default({}),
  /**
   * Environment variables for the endpoint's workers (a model hub token, a region), on top of the
   * short list of the server's own that workers get. @default {}
   */
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "variable names are letters, digits and _, not starting with a digit"), z.string())
    .default({}),
  rateLimits: rateLimitsSchema,
});
/** An endpoint's settings once loaded: workersMax and startTimeoutMs are always set. */
export type EndpointConfig = Omit<z.infer<typeof endpointConfigSchema>, "workersMax" | "startTimeoutMs"> & {
  workersMax: number;
  startTimeoutMs: number;
};

/** Server-wide settings; the intervals exist so tests and operators can shorten them. */
export const serverConfigSchema = z.strictObject({
  /** @default 8080 */
  port: z.number().int().min(0).max(65535).default(8080),
  /** @default "0.0.0.0" */
  host: z.string().default("0.0.0.0"),
  /** Directory of the embedded store, and of files kept by the server. @default ".data" */
  data: z.string().default(".data"),
  /**
   * GPUs the scaler places workers on: ids ("0", a UUID) or { id, memoryMb }.
   * @default the NVIDIA GPUs nvidia-smi lists, by UUID, with their memory (looked up at config load, only when an endpoint needs GPUs); none without it
   */
  gpus: gpusSchema.optional(),
  /**
   * Folder of the per-GPU lock files through which the servers on one host never hand out the same
   * card. @default /run/spool/gpus where this server can write, else .spool-gpus beside the data directory
   */
  gpuLockDir: z.string().min(1).optional(),
  /** Store URL: redis://host:port for several servers on one Redis; the embedded store under `data` when unset. */
  store: z.string().optional(),
  /** Longest an empty job-take is held open before 204 (the worker waits up to 90 s). @default 20000 */
  takeWaitMs: z.number().int().min(0).max(LONG_POLL_MAX_MS).default(20_000),
  /** Longest an empty job-stop poll is held open. @default 20000 */
  stopWaitMs: z.number().int().min(0).max(LONG_POLL_MAX_MS).default(20_000),
  /** Longest a /stream call with nothing new waits for a chunk or a final state. @default 2000 */
  streamWaitMs: z.number().int().min(0).max(30_000).default(2_000),
  /**
   * Most bytes of log lines kept per job (GET /logs): past it one line says the log was cut and
   * later lines are not kept. @default 1048576
   */
  logMaxBytes: z
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(1024 * 1024),
  /** How often an SSE response with nothing to send writes a comment line, so proxies keep it open. @default 15000 */
  sseKeepAliveMs: z.number().int().min(1).default(15_000),
  /** A worker silent for this long is lost: its jobs are re-queued once, then FAILED. @default 60000 */
  workerLossTimeoutMs: z.number().int().min(1).default(60_000),
  /**
   * A job a worker has held this long that its heartbeat (ping job_id) no longer lists is lost,
   * e.g. when the answer to its take never reached it. @default 30000
   */
  pingGraceMs: z.number().int().min(0).default(30_000),
  /** How often retention, expiry, timeouts and worker loss are checked. @default 1000 */
  sweepIntervalMs: z.number().int().min(1).default(1_000),
  /** A worker process the scaler stops (idle, past a job's deadline) is killed if still there after this long. @default 5000 */
  killGraceMs: z.number().int().min(0).default(5_000),
  /** How often the scaler decides how many workers each endpoint needs. @default 1000 */
  scaleIntervalMs: z.number().int().min(1).default(1_000),
  /** How long a finished synchronous job's result stays. @default 60000 */
  syncRetentionMs: z.number().int().min(0).default(LIMITS.syncRetention),
  /** Base URL that file URLs are built on; the request's origin when unset. */
  publicUrl: z.string().url().optional(),
  /**
   * Host names (`name`: any port; `name:port`; `*`: any host) a request's Host may name besides
   * those always answered: the listen address (any IP address when it is 0.0.0.0 or ::),
   * localhost and publicUrl's host. Any other Host is a 400. @default []
   */
  allowedHosts: allowedHostsSchema,
  /** Peers (IPs, CIDRs) whose X-Forwarded-Host and X-Forwarded-Proto are believed. @default [] */
  trustedProxies: trustedProxiesSchema,
  /** How long an Idempotency-Key names the job it made, whatever that job's retention. @default 86400000 */
  idempotencyTtlMs: z
    .number()
    .int()
    .min(1)
    .default(24 * 3600_000),
  /**
   * A bucket for files workers upload for jobs without their own s3Config (instead of the data
   * directory): needed when several servers share a store.
   */
  files: s3ConfigSchema.optional(),
  /** How long signed URLs of uploaded files work (and files are kept). @default 604800000 */
  fileUrlTtlMs: z
    .number()
    .int()
    .min(1)
    .default(7 * 24 * 3600_000),
  /** The window of the per-operation rate limits. @default 10000 */
  rateWindowMs: z.number().int().min(1).default(10_000),
  /** Wait between webhook attempts (3 in all). @default 10000 */
  webhookRetryDelayMs: z.number().int().min(0).default(10_000),
  /** How long one webhook call may take. @default 10000 */
  webhookTimeoutMs: z.number().int().min(1).default(10_000),
  /**
   * Refuse webhook URLs on loopback, private, link-local and metadata addresses, but those in
   * webhookAllow; false calls any address. @default true
   */
  webhookBlockPrivate: z.boolean().default(true),
  /**
   * Receivers on a private network that are still called: CIDRs
   * (10.1.0.0/16, fd00::/8, 127.0.0.1) or host names. @default []
   */
  webhookAllow: z.array(z.string().min(1)).default([]),
  /** Standard Webhooks signing secret (whsec_...); generated under the data dir when unset. */
  webhookSecret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=]{16,}$/, "must be whsec_ followed by base64")
    .optional(),
  /** How long a finished asynchronous job's result stays. @default 1800000 */
  asyncRetentionMs: z.number().int().min(0).default(LIMITS.asyncRetention),
  /** Serve /metrics without a key (e.g. to a Prometheus on a private network). @default false */
  metricsPublic: z.boolean().default(false),
  /**
   * Who starts workers: "local" processes from an endpoint's handler, or "external" (Kubernetes
   * with KEDA, hosts of your own) where Spool starts none and serves the workers that connect.
   * @default "local"
   */
  provider: z.enum(["local", "external"]).default("local"),
  /**
   * How workers the server starts are confined: "bubblewrap" runs each in a sandbox (its own PID
   * namespace, the host read-only, no view of the data dir or the config file); "none" runs them
   * with the server's rights; "auto" uses bubblewrap where it works. @default "auto"
   */
  sandbox: z.enum(["auto", "bubblewrap", "none"]).default("auto"),
});
export type ServerConfig = z.infer<typeof serverConfigSchema>;

const endpointId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "endpoint ids are 1-64 of A-Z a-z 0-9 _ -");

export const configSchema = z.strictObject({
  server: serverConfigSchema.default(serverConfigSchema.parse({})),
  // A null-prototype object: an id from a request finds only configured endpoints.
  endpoints: z
    .record(endpointId, endpointConfigSchema)
    .default({})
    .transform((endpoints) => Object.assign(Object.create(null) as typeof endpoints, endpoints)),
});
/** The loaded config: every endpoint's workersMax set, and the GPUs known. */
export type Config = Omit<z.infer<typeof configSchema>, "server" | "endpoints"> & {
  server: z.infer<typeof serverConfigSchema> & { gpus: GpuDevice[] };
  endpoints: Record<string, EndpointConfig>;
  /** The file it was read from (its workers must not read it); none for the built-in default. */
  configFile?: string;
};
/** What a caller may pass: every field optional, defaults filled in by parseConfig. */
export type ConfigInput = z.input<typeof configSchema>;

/** Whether Spool starts the endpoint's workers itself (local processes from its handler). */
export function startsWorkers(
  config: { server: Pick<Config["server"], "provider"> },
  endpoint: Pick<EndpointConfig, "handler" | "provider">,
): boolean {
  return endpoint.handler !== undefined && (endpoint.provider ?? config.server.provider) === "local";
}

/** The endpoint configured under `id`; undefined for any other string (own properties only). */
export function findEndpoint(config: Config, id: string): EndpointConfig | undefined {
  return Object.hasOwn(config.endpoints, id) ? config.endpoints[id] : undefined;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** What one worker of the endpoint takes: gpusPerWorker (1 for a model endpoint on cuda) and gpuMemoryMb. */
export function gpuNeed(endpoint: Pick<EndpointConfig, "gpusPerWorker" | "gpuMemoryMb" | "options">): GpuNeed {
  const gpus = endpoint.gpusPerWorker ?? (endpoint.options.device === "cuda" ? 1 : 0);
  return gpus > 0 && endpoint.gpuMemoryMb !== undefined ? { gpus, memoryMb: endpoint.gpuMemoryMb } : { gpus };
}

/** A model endpoint: its handler options name a device (the image and text handlers do). */
const isModelEndpoint = (endpoint: Pick<EndpointConfig, "options">): boolean => typeof endpoint.options.device === "string";

/** How parseConfig learns the machine's GPUs. */
export interface MachineOptions {
  /** Lists the GPUs when an endpoint needs them and server.gpus is unset or names a card by index. @default nvidia-smi */
  detectGpus?: () => GpuDevice[];
  /**
   * Whether the config is for a server that starts workers here: its GPUs are looked up and an
   * endpoint that can never be placed is refused. False for commands that only read the store
   * (keys, usage), which may run on another machine. @default true
   */
  serving?: boolean;
}

/**
 * The defaults that depend on the machine, filled in at config load: the GPUs (nvidia-smi, only
 * when an endpoint whose workers this server starts needs them) and each endpoint's workersMax.
 * An endpoint whose worker can never be placed on these GPUs is refused here, by name.
 */
function withFleetDefaults(parsed: z.infer<typeof configSchema>, source: string, machine: MachineOptions): Config {
  const serving = machine.serving ?? true;
  const placed = Object.entries(parsed.endpoints).filter(([, ep]) => startsWorkers(parsed, ep) && gpuNeed(ep).gpus > 0);
  const detect = () => (placed.length && serving ? (machine.detectGpus ?? detectGpus)() : []);
  const configured = parsed.server.gpus;
  const gpus = !configured ? detect() : namesIndexes(configured) ? resolveGpus(configured, detect()) : configured;
  for (const [id, ep] of serving ? placed : []) {
    const need = gpuNeed(ep);
    if (gpuCapacity(gpus, need) > 0) continue;
    const what = `each worker needs ${need.gpus} GPU${need.gpus > 1 ? "s" : ""}${need.memoryMb ? ` with ${need.memoryMb} MiB free` : ""}${ep.gpusPerWorker === undefined ? ' (options.device = "cuda")' : ""}`;
    const have = gpus.length
      ? `the GPUs here are ${gpus.map((g) => (g.memoryMb ? `${gpuLabel(g)} (${g.memoryMb} MiB)` : gpuLabel(g))).join(", ")}`
      : parsed.server.gpus
        ? "server.gpus lists none"
        : "this host has no GPU (nvidia-smi lists none; server.gpus is unset)";
    throw new ConfigError(
      `${source}: endpoints.${id}: ${what}, and ${have}: set server.gpus, gpusPerWorker or gpuMemoryMb, or options.device = "cpu"`,
    );
  }
  const endpoints = parsed.endpoints as Record<string, EndpointConfig>;
  for (const ep of Object.values(endpoints)) {
    ep.startTimeoutMs ??= START_TIMEOUT_MS[isModelEndpoint(ep) ? "model" : "other"];
    if (ep.workersMax !== undefined) continue;
    const need = gpuNeed(ep);
    ep.workersMax = !isModelEndpoint(ep) ? DEFAULT_WORKERS_MAX : need.gpus > 0 ? Math.max(1, gpuCapacity(gpus, need)) : 1;
  }
  return { ...parsed, server: { ...parsed.server, gpus }, endpoints };
}

/** workersMax of an endpoint that is not a model endpoint. */
const DEFAULT_WORKERS_MAX = 3;
/** startTimeoutMs: a model endpoint's setup loads weights (a download first, maybe), which takes minutes. */
const START_TIMEOUT_MS = { model: 600_000, other: 120_000 };

/** Validates a config object; the one place defaults come from (tests pass a fake GPU list in `machine`). */
export function parseConfig(raw: unknown, source = "config", machine: MachineOptions = {}): Config {
  // zod drops a __proto__ key without a word; say so instead of losing the endpoint.
  const endpoints = (raw as { endpoints?: unknown } | null)?.endpoints;
  if (typeof endpoints === "object" && endpoints !== null && Object.hasOwn(endpoints, "__proto__")) {
    throw new ConfigError(`${source}: endpoints: __proto__ cannot be an endpoint id`);
  }
  const result = configSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(`${source}: ${describeIssues(result.error)}`);
  return withFleetDefaults(result.data, source, machine);
}

/** The package's root: relative handler paths of the built-in config are resolved from it. */
const PACKAGE_ROOT = resolve(import.meta.dir, "../..");

/** Handler paths in a config file are relative to that file's folder. */
function resolveHandlers(config: Config, base: string): Config {
  for (const ep of Object.values(config.endpoints)) if (ep.handler) ep.handler = resolve(base, ep.handler);
  return config;
}

/** Reads a TOML config file, or the built-in default (endpoint `echo`) when none is given. */
export async function loadConfig(path?: string, machine: MachineOptions = {}): Promise<Config> {
  if (!path) return resolveHandlers(parseConfig(Bun.TOML.parse(defaultToml), "built-in default config", machine), PACKAGE_ROOT);
  const file = Bun.file(path);
  if (!(await file.exists())) throw new ConfigError(`config file not found: ${path}`);
  let raw: unknown;
  try {
    raw = Bun.TOML.parse(await file.text());
  } catch (err) {
    throw new ConfigError(`${path}: not valid TOML: ${(err as Error).message}`);
  }
  const config = resolveHandlers(parseConfig(raw, path, machine), dirname(resolve(path)));
  config.configFile = resolve(path);
  return config;
}
