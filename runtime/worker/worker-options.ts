import { z } from "zod";
import { describeIssues } from "../protocol/job-request.ts";
import { GENERATION_ENV } from "../protocol/worker-env.ts";
import { DEFAULT_TIMEOUTS } from "./worker-api.ts";
import { urlsFromEnv, urlsFromFlags, type WorkerUrls } from "./worker-urls.ts";

/** Worker settings from flags and RunPod's environment contract; the one place defaults live. */
const schema = z.object({
  workerId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, "must be 1-128 of A-Z a-z 0-9 _ . -"),
  apiKey: z.string().min(1, "is required (--api-key or RUNPOD_AI_API_KEY)"),
  /** @default 10000 */
  pingIntervalMs: z.coerce.number().int().min(100).default(10_000),
  /** @default 5000 */
  timeoutGraceMs: z.coerce.number().int().min(0).default(5_000),
  /** @default 30000 */
  drainTimeoutMs: z.coerce.number().int().min(0).default(30_000),
  /** Exit (code 0) after this long with no job, e.g. as a KEDA ScaledJob's pod; 0: never. @default 0 */
  exitWhenIdleMs: z.coerce.number().int().min(0).default(0),
  /** Ping, result and upload requests. @default 30000 */
  requestTimeoutMs: z.coerce.number().int().min(100).default(DEFAULT_TIMEOUTS.requestMs),
  /** job-take and stop long-polls. @default 95000 */
  longPollTimeoutMs: z.coerce.number().int().min(100).default(DEFAULT_TIMEOUTS.longPollMs),
});

export type WorkerOptions = z.infer<typeof schema> & { urls: WorkerUrls };

export interface WorkerFlags {
  url?: string;
  endpoint?: string;
  "api-key"?: string;
  "worker-id"?: string;
}

/** Flags win over the environment; with neither a URL nor RUNPOD_WEBHOOK_GET_JOB there is no server. */
export function workerOptions(flags: WorkerFlags, env: Record<string, string | undefined>): WorkerOptions {
  let urls: WorkerUrls | null;
  if (flags.url) {
    if (!flags.endpoint) throw new Error("--url needs --endpoint ID");
    urls = urlsFromFlags(flags.url, flags.endpoint);
  } else {
    urls = urlsFromEnv(env);
  }
  if (!urls)
    throw new Error("no queue server: pass --url URL --endpoint ID, or set RunPod's RUNPOD_WEBHOOK_GET_JOB and RUNPOD_WEBHOOK_POST_OUTPUT");
  const generation = Number(env[GENERATION_ENV] ?? 1);
  const base = flags["worker-id"] ?? env.RUNPOD_POD_ID ?? `worker-${crypto.randomUUID().slice(0, 8)}`;
  const parsed = schema.safeParse({
    workerId: generation > 1 ? `${base}-r${generation}` : base,
    apiKey: flags["api-key"] ?? env.SPOOL_API_KEY ?? env.RUNPOD_AI_API_KEY ?? "",
    pingIntervalMs: env.RUNPOD_PING_INTERVAL,
    timeoutGraceMs: env.SPOOL_TIMEOUT_GRACE_MS,
    drainTimeoutMs: env.SPOOL_DRAIN_TIMEOUT_MS,
    exitWhenIdleMs: env.SPOOL_EXIT_WHEN_IDLE_MS,
    requestTimeoutMs: env.SPOOL_REQUEST_TIMEOUT_MS,
    longPollTimeoutMs: env.SPOOL_LONG_POLL_TIMEOUT_MS,
  });
  if (!parsed.success) throw new Error(`worker settings: ${describeIssues(parsed.error)}`);
  return { ...parsed.data, urls };
}
