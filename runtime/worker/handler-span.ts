import type { TakenJob } from "../protocol/worker-wire.ts";
import type { Tracing } from "../telemetry/tracing.ts";
import type { Outcome } from "./executor.ts";

/**
 * Runs a job's handler in its span (while traces are on): a child of the job's submit span when
 * the server sent its traceparent. Log lines and ctx.span's spans inside it are its.
 */
export function handlerSpan(t: Tracing, job: TakenJob, workerId: string, run: () => Promise<Outcome>): Promise<Outcome> {
  return t.run("spool.handler", job.traceparent, { "spool.job.id": job.id, "spool.worker.id": workerId }, async (span) => {
    const outcome = await run();
    if (outcome.kind === "error") span.fail(outcome.error.slice(0, 1_000));
    if (outcome.kind === "stopped") span.set({ "spool.job.stopped": String((outcome.reason as Error)?.name ?? outcome.reason) });
    return outcome;
  });
}
