import { LIMITS } from "../protocol/limits.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import type { Log } from "../log.ts";
import type { Handler } from "../../sdk/define-handler.ts";
import { execute, type Outcome } from "./executor.ts";
import { jobContext, stopReasons } from "./job-context.ts";
import { uploadToDirectory } from "../protocol/uploads.ts";

/** Reads --input JSON, or ./test_input.json (runpod-python's file: {"input": {...}}). */
export async function localInput(flag: string | undefined): Promise<Record<string, unknown>> {
  let text = flag;
  let source = "--input";
  if (text === undefined) {
    const file = Bun.file("test_input.json");
    if (!(await file.exists())) throw new Error("no input: pass --input '<json>' or put it in ./test_input.json");
    text = await file.text();
    source = "test_input.json";
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${source} is not valid JSON`);
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value) && "input" in value) value = value.input;
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`${source}: input must be a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * Runs one job in this process with no server: streamed chunks go to the log, files under
 * ./spool-output, and the outcome is returned for the caller to print.
 */
export async function runOnce(handler: Handler, input: Record<string, unknown>, log: Log, handlerOptions: unknown = {}): Promise<Outcome> {
  const job: TakenJob = {
    id: `local-${crypto.randomUUID()}`,
    input,
    policy: { executionTimeout: LIMITS.executionTimeoutDefault, lowPriority: false, ttl: LIMITS.ttlDefault },
    deadline: Date.now() + LIMITS.executionTimeoutDefault,
  };
  await handler.setup?.(handlerOptions);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(stopReasons.timedOut(job.policy.executionTimeout)), job.policy.executionTimeout);
  try {
    const ctx = jobContext({
      job,
      workerId: "local",
      signal: controller.signal,
      log,
      progress: async (value) => log.info("progress", { value }),
      files: (jobId, name, data) => uploadToDirectory("spool-output", jobId, name, data),
      onRefresh: () => {},
      handlerOptions,
    });
    return await execute(handler, job, ctx, async (chunk) => log.info("stream chunk", { chunk }));
  } finally {
    clearTimeout(timer);
  }
}
