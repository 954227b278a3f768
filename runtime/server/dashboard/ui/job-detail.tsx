import { useEffect, useState } from "preact/hooks";
import type { EndpointInfo, JobDetail } from "./api.ts";
import type { Session } from "./session.ts";
import { CancelButton, RetryButton } from "./actions.tsx";
import { clock, ms, pretty } from "./format.ts";
import { JobOutput, jobCost } from "./job-output.tsx";
import { useJobStream } from "./job-stream.ts";
import { JobLogLines } from "./log-lines.tsx";

/** One job: input (without s3Config), output, error, progress, chunks, times, worker; live. */
export function JobDetailView({ session, endpoint, id }: { session: Session; endpoint: EndpointInfo; id: string }) {
  const ep = endpoint.id;
  const [job, setJob] = useState<JobDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  // A retry starts the job over (same id): its stream is followed again from the new start.
  const [run, setRun] = useState(0);
  useEffect(() => session.hub.on((e) => void (e.type === "retried" && e.job?.id === id && setRun((n) => n + 1))), [id]);
  const live = useJobStream(session.api, ep, id, run);
  const liveStatus = live.status?.status;

  // The detail is read again whenever the live stream reports a new status (times, worker, retries).
  useEffect(() => {
    let stop = false;
    session.api.job(ep, id).then(
      (j) => !stop && (setJob(j), setError(null)),
      (err: Error) => !stop && setError(err.message),
    );
    return () => {
      stop = true;
    };
  }, [ep, id, liveStatus]);

  const status = live.status ?? job;
  const output = status?.status === "COMPLETED" ? status.output : undefined;
  const progress = status?.status === "IN_PROGRESS" ? (live.status?.output ?? job?.progress) : undefined;
  const chunks = live.chunks.length || live.status ? live.chunks : (job?.stream ?? []);
  const cost = jobCost(output, chunks);
  return (
    <>
      <p>
        <a href={`#/endpoints/${encodeURIComponent(ep)}`}>← {ep} jobs</a>
      </p>
      <h1>
        Job <span class="mono">{id}</span>{" "}
        {status && (
          <span class={`status s-${status.status}`} data-testid="job-status">
            {status.status}
          </span>
        )}
      </h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {live.error && !error && <p class="muted">{live.error}</p>}
      {status && (
        <p class="actions">
          <CancelButton session={session} ep={ep} id={id} status={status.status} />{" "}
          <RetryButton session={session} ep={ep} id={id} status={status.status} />
        </p>
      )}
      {job && (
        <dl class="facts">
          <dt>Worker</dt>
          <dd class="mono">{status?.workerId ?? "–"}</dd>
          <dt>Delay</dt>
          <dd>{ms(status?.delayTime)}</dd>
          <dt>Execution</dt>
          <dd>{ms(status?.executionTime)}</dd>
          <dt>Cost</dt>
          <dd>{cost === null ? "–" : `$${cost.toFixed(10).replace(/0+$/, "").replace(/\.$/, "")}`}</dd>
          <dt>Created</dt>
          <dd>{clock(job.createdAt)}</dd>
          <dt>Started</dt>
          <dd>{clock(job.startedAt)}</dd>
          <dt>Completed</dt>
          <dd>{clock(job.completedAt)}</dd>
          <dt>Expires</dt>
          <dd>{clock(job.expiresAt)}</dd>
          <dt>Retries / worker losses</dt>
          <dd data-testid="retries">
            {job.retries ?? 0} / {job.losses ?? 0}
          </dd>
          <dt>Policy</dt>
          <dd class="mono">
            {job.policy
              ? `executionTimeout ${job.policy.executionTimeout} ms, ttl ${job.policy.ttl} ms${job.policy.lowPriority ? ", low priority" : ""}`
              : "–"}
          </dd>
        </dl>
      )}
      {progress !== undefined && (
        <section aria-labelledby="progress-h">
          <h2 id="progress-h">Progress</h2>
          <pre>{pretty(progress)}</pre>
        </section>
      )}
      {status?.error !== undefined && (
        <section aria-labelledby="error-h">
          <h2 id="error-h">Error</h2>
          <pre class="error">{typeof status.error === "string" ? status.error : pretty(status.error)}</pre>
        </section>
      )}
      {(output !== undefined || chunks.length > 0) && (
        <section aria-labelledby="output-h">
          <h2 id="output-h">Output</h2>
          <JobOutput output={output} chunks={chunks} status={status?.status} input={job?.input} />
        </section>
      )}
      <section aria-labelledby="logs-h">
        <h2 id="logs-h">Logs</h2>
        <JobLogLines lines={live.logs} />
      </section>
      {job && (
        <section aria-labelledby="input-h">
          <h2 id="input-h">Input</h2>
          {job.inputHidden ? <p class="muted">{job.inputHidden}</p> : <pre>{pretty(job.input)}</pre>}
        </section>
      )}
    </>
  );
}
