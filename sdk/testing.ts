import type { z } from "zod";
import { LIMITS } from "../runtime/protocol/limits.ts";
import { describeIssues } from "../runtime/protocol/job-request.ts";
import { checkFileName, toBlob } from "../runtime/protocol/uploads.ts";
import type { TakenJob } from "../runtime/protocol/worker-wire.ts";
import { execute } from "../runtime/worker/executor.ts";
import type { Handler, HandlerLog } from "./define-handler.ts";

/** A file the handler passed to ctx.upload during a test run. */
export interface UploadedFile {
  name: string;
  contentType: string;
  data: Uint8Array;
}

/** How a job run by runJob ended, with everything the handler sent on the way. */
export type JobRun<Output> = {
  /** Each chunk a generator handler yielded, in order (empty for a plain handler). */
  stream: Output[];
  /** Each value passed to ctx.progress. */
  progress: unknown[];
  /** Files passed to ctx.upload; the URL the handler got back is `memory://<job id>/<name>`. */
  files: UploadedFile[];
} & (
  | { status: "COMPLETED"; output: unknown }
  /** `error` is the message (the input's failing field, or what the handler threw); `errorType` the error's name. */
  | { status: "FAILED"; error: string; errorType: string }
);

export interface RunJobOptions<Options extends z.ZodType> {
  /** The endpoint's options (`[endpoints.<id>.options]`), parsed with the handler's options schema. @default {} */
  options?: z.input<Options>;
  /** Aborts ctx.signal, as a cancel does. */
  signal?: AbortSignal;
}

const quietLog: HandlerLog = { info() {}, warn() {}, error() {} };

/**
 * Runs one job through a handler in this process, as a worker would: the input is checked with the
 * handler's schema, setup() runs first with the parsed options, and a generator's chunks are collected.
 * For the handler's own tests (bun test); no server and no worker process.
 *
 * @example
 * import { expect, test } from "bun:test";
 * import { runJob } from "spool/sdk/testing";
 * import handler from "./handler.ts";
 *
 * test("greets", async () => {
 *   expect(await runJob(handler, { name: "Ada" })).toMatchObject({ status: "COMPLETED", output: { greeting: "Hello, Ada!" } });
 * });
 */
export async function runJob<Schema extends z.ZodType, Output, Options extends z.ZodType>(
  handler: Handler<Schema, Output, Options>,
  input: z.input<Schema>,
  runOptions: RunJobOptions<Options> = {},
): Promise<JobRun<Output>> {
  const stream: Output[] = [];
  const progress: unknown[] = [];
  const files: UploadedFile[] = [];
  const parsedOptions = handler.options
    ? handler.options.safeParse(runOptions.options ?? {})
    : { success: true as const, data: runOptions.options ?? {} };
  if (!parsedOptions.success) throw new Error(`handler options: ${describeIssues(parsedOptions.error)}`);
  await handler.setup?.(parsedOptions.data as z.output<Options>);
  const job: TakenJob = {
    id: `test-${crypto.randomUUID()}`,
    input: input as Record<string, unknown>,
    policy: { executionTimeout: LIMITS.executionTimeoutDefault, lowPriority: false, ttl: LIMITS.ttlDefault },
    deadline: Date.now() + LIMITS.executionTimeoutDefault,
  };
  const signal = runOptions.signal ?? new AbortController().signal;
  const ctx = {
    options: parsedOptions.data,
    signal,
    workerId: "test",
    log: quietLog,
    async progress(value: unknown) {
      progress.push(value);
    },
    async upload(name: string, data: Blob | ArrayBuffer | Uint8Array | string, contentType = "application/octet-stream") {
      checkFileName(name);
      files.push({ name, contentType, data: new Uint8Array(await toBlob(data, contentType).arrayBuffer()) });
      return `memory://${job.id}/${name}`;
    },
    refreshWorker() {},
    async span<T>(_name: string, fn: () => Promise<T> | T): Promise<T> {
      return fn();
    },
  };
  const outcome = await execute(handler as unknown as Handler, job, ctx, async (chunk) => stream.push(chunk as Output));
  const seen = { stream, progress, files };
  if (outcome.kind === "output") return { ...seen, status: "COMPLETED", output: outcome.output };
  if (outcome.kind === "stopped")
    return {
      ...seen,
      status: "FAILED",
      error: String((outcome.reason as Error)?.message ?? outcome.reason),
      errorType: (outcome.reason as Error)?.name ?? "Error",
    };
  return { ...seen, status: "FAILED", ...failure(outcome.error) };
}

/** The message and type of a failure: a thrown error comes as RunPod's JSON shape, a bad input as plain text. */
function failure(error: string): { error: string; errorType: string } {
  try {
    const shape = JSON.parse(error) as { error_type: string; error_message: string };
    return { error: shape.error_message, errorType: shape.error_type };
  } catch {
    return { error, errorType: "InvalidInput" };
  }
}
