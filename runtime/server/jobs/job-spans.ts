import type { Tracing } from "../../telemetry/tracing.ts";
import type { EndedJob, EnqueuedJob, StoredJob } from "../store/store.ts";
import type { SubmitOptions } from "./submission.ts";

/**
 * The server's spans of a job, called only while traces are on. Each job's spans hang under
 * its submit span, whose traceparent the job keeps; a job submitted while they were off has none.
 */

/** The submit span, under the client's traceparent (a new trace without one); the job keeps the span's own. */
export async function tracedSubmit(
  t: Tracing,
  endpointId: string,
  options: SubmitOptions,
  submit: (options: SubmitOptions) => Promise<EnqueuedJob>,
): Promise<EnqueuedJob> {
  const span = t.start("spool.submit", options.traceparent, { "spool.endpoint.id": endpointId }, "server");
  try {
    const job = await submit({ ...options, traceparent: span.traceparent });
    span.set({ "spool.job.id": job.id });
    return job;
  } catch (err) {
    span.fail(String((err as Error)?.message ?? err));
    throw err;
  } finally {
    span.end();
  }
}

/** A taken job's queue wait (from its queueing to its take) and its take, up to the answer (`now`). */
export function recordTake(t: Tracing, jobs: StoredJob[], workerId: string, now: number): void {
  for (const job of jobs) {
    if (!job.traceparent) continue;
    const attributes = { "spool.job.id": job.id, "spool.endpoint.id": job.endpointId, "spool.worker.id": workerId };
    const taken = job.startedAt ?? now;
    t.record("spool.queue_wait", job.traceparent, job.queuedAt, taken, attributes);
    t.record("spool.take", job.traceparent, taken, now, attributes);
  }
}

/** A result's span (job-done that ended the job), from the post's arrival (`start`). */
export function recordResult(t: Tracing, job: EndedJob, start: number, end: number): void {
  if (!job.traceparent) return;
  const error = job.status === "COMPLETED" ? undefined : job.status;
  t.record(
    "spool.result",
    job.traceparent,
    start,
    end,
    {
      "spool.job.id": job.id,
      "spool.endpoint.id": job.endpointId,
      "spool.job.status": job.status,
      ...(job.workerId ? { "spool.worker.id": job.workerId } : {}),
    },
    error,
  );
}
