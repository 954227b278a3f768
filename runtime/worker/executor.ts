import { describeIssues } from "../protocol/job-request.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import type { Handler, HandlerContext } from "../../sdk/define-handler.ts";
import { errorShape } from "./error-shape.ts";

/** How a job ended on this worker. `stopped`: its signal fired, so no result is posted. */
export type Outcome =
  | { kind: "output"; output: unknown; isStream: boolean }
  | { kind: "error"; error: string }
  | { kind: "stopped"; reason: unknown };

function isAsyncGenerator(v: unknown): v is AsyncGenerator<unknown, unknown, undefined> {
  return typeof v === "object" && v !== null && typeof (v as AsyncGenerator).next === "function" && Symbol.asyncIterator in v;
}

/**
 * Runs one job: validates its input with the handler's schema, calls the handler, posts each
 * chunk of a generator through `emit` (in order), and returns what the job's result is.
 */
export async function execute(
  handler: Handler,
  job: TakenJob,
  ctx: HandlerContext,
  emit: (chunk: unknown) => Promise<unknown>,
): Promise<Outcome> {
  const parsed = handler.input.safeParse(job.input);
  if (!parsed.success) return { kind: "error", error: `Invalid parameter: ${describeIssues(parsed.error)}` };
  try {
    const result = handler.handler({ id: job.id, input: parsed.data, s3Config: job.s3Config, policy: job.policy }, ctx);
    if (isAsyncGenerator(result)) {
      const chunks: unknown[] = [];
      for await (const chunk of result) {
        if (ctx.signal.aborted) break;
        await emit(chunk);
        if (handler.returnAggregateStream) chunks.push(chunk);
      }
      if (ctx.signal.aborted) return { kind: "stopped", reason: ctx.signal.reason };
      return { kind: "output", output: chunks, isStream: true };
    }
    const output = await result;
    if (ctx.signal.aborted) return { kind: "stopped", reason: ctx.signal.reason };
    return { kind: "output", output, isStream: false };
  } catch (err) {
    if (ctx.signal.aborted) return { kind: "stopped", reason: ctx.signal.reason };
    return { kind: "error", error: errorShape(err, ctx.workerId) };
  }
}
