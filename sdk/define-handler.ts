import type { z } from "zod";
import type { S3Config } from "../runtime/protocol/job-request.ts";
import { HANDLER_KIND, hasHandlerKind } from "../runtime/protocol/handler-kind.ts";

/** The execution policy a job runs under (milliseconds). */
export interface JobPolicy {
  executionTimeout: number;
  lowPriority: boolean;
  ttl: number;
}

/** A job as a handler sees it; `input` has already passed the handler's schema. */
export interface HandlerJob<Input> {
  id: string;
  input: Input;
  s3Config?: S3Config;
  policy: JobPolicy;
}

export interface HandlerLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** What the runtime gives a handler besides the job. */
export interface HandlerContext<Options = unknown> {
  /** The endpoint's `[endpoints.<id>.options]`, parsed with the handler's `options` schema. */
  options: Options;
  /** Fires on cancel, at the execution deadline and on worker shutdown; `reason` says which. */
  signal: AbortSignal;
  /** Publishes a progress value, shown by /status while the job runs. */
  progress(value: unknown): Promise<void>;
  /**
   * Stores a file and returns a URL that works for 7 days: through the job's s3Config when it
   * has one (a presigned GET), else through the queue server's file store.
   */
  upload(name: string, data: Blob | ArrayBuffer | Uint8Array | string, contentType?: string): Promise<string>;
  log: HandlerLog;
  workerId: string;
  /** Asks for this worker to be replaced once the job is done (RunPod's refresh_worker). */
  refreshWorker(): void;
  /**
   * Runs `fn` in a trace span named `name`, a child of the job's handler span (or of the span
   * `ctx.span` runs in), and returns what it returns; a throw marks the span failed. While traces
   * are off (no OTEL_EXPORTER_OTLP_ENDPOINT) it only runs `fn`.
   * @example const latents = await ctx.span("denoise", () => denoise(prompt, steps));
   */
  span<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
}

/** A plain handler returns the output; an async generator streams each yield as a chunk. */
export type HandlerFunction<Input, Output, Options = unknown> = (
  job: HandlerJob<Input>,
  ctx: HandlerContext<Options>,
) => Promise<Output> | Output | AsyncGenerator<Output, unknown, undefined>;

/** How many jobs a worker runs at once: fixed, or RunPod's concurrency_modifier(current). */
export type Concurrency = number | ((current: number) => number);

export interface HandlerOptions<Schema extends z.ZodType, Output, Options extends z.ZodType = z.ZodUnknown> {
  /** Schema of job.input; a job whose input fails it ends FAILED naming the field. */
  input: Schema;
  /**
   * Schema of the endpoint's settings for this handler (`[endpoints.<id>.options]` in the
   * config, e.g. a model path, a device, prices). A worker whose settings fail it does not start.
   */
  options?: Options;
  handler: HandlerFunction<z.output<Schema>, Output, z.output<Options>>;
  /** With a generator handler, also make the list of chunks the job's output. @default false */
  returnAggregateStream?: boolean;
  /** @default 1 */
  concurrency?: Concurrency;
  /** Runs once per worker before its first job, with the parsed options: load models here. */
  setup?: (options: z.output<Options>) => Promise<void> | void;
}

/** A handler as the runtime loads it. */
export interface Handler<Schema extends z.ZodType = z.ZodType, Output = unknown, Options extends z.ZodType = z.ZodType>
  extends HandlerOptions<Schema, Output, Options> {
  readonly kind: typeof HANDLER_KIND;
}

/**
 * Declares a typed job handler; export it as the module's default.
 * The input type is inferred from the schema, so no generics are written.
 *
 * @example
 * import { z } from "zod";
 * import { defineHandler } from "spool/sdk";
 *
 * export default defineHandler({
 *   input: z.object({ text: z.string() }),
 *   async handler(job, ctx) {
 *     return { upper: job.input.text.toUpperCase() };
 *   },
 * });
 */
export function defineHandler<Schema extends z.ZodType, Output, Options extends z.ZodType = z.ZodUnknown>(
  options: HandlerOptions<Schema, Output, Options>,
): Handler<Schema, Output, Options> {
  // Checked here, at import: a handler without them could only fail each job later, unclearly.
  if (typeof (options as { input?: { safeParse?: unknown } }).input?.safeParse !== "function") {
    throw new TypeError("defineHandler: `input` must be a zod schema (z.object({...}), or z.unknown() to take any input)");
  }
  if (typeof options.handler !== "function") throw new TypeError("defineHandler: `handler` must be a function");
  return { ...options, kind: HANDLER_KIND };
}

/** Name of the environment variable that carries an endpoint's handler options (JSON). */
export { OPTIONS_ENV } from "../runtime/protocol/worker-env.ts";

export function isHandler(value: unknown): value is Handler {
  return hasHandlerKind(value);
}
