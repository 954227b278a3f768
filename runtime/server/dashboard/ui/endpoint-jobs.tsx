import { useEffect, useState } from "preact/hooks";
import type { EndpointInfo, JobSummary } from "./api.ts";
import { ApiError } from "./api.ts";
import type { Session } from "./session.ts";
import { CancelButton, PurgeButton, RetryButton } from "./actions.tsx";
import { clock, ms } from "./format.ts";
import { WorkerLog } from "./log-lines.tsx";

const STATUSES = ["IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];

/** Recent jobs of an endpoint (GET /requests), filtered by status and paged, updated live. */
export function EndpointJobs({ session, endpoint }: { session: Session; endpoint: EndpointInfo }) {
  const ep = endpoint.id;
  const [status, setStatus] = useState("");
  // Cursors of the pages before this one; undefined is the newest page.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [jobs, setJobs] = useState<JobSummary[] | null>(null);
  const [next, setNext] = useState<string | undefined>();
  const [error, setError] = useState<string | null>(null);
  const cursor = cursors[cursors.length - 1];
  // Read again every 10 s: job events come from this server only (several servers share a Redis).
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((t) => t + 1), 10_000);
    return () => clearInterval(timer);
  }, []);

  useEffect(() => {
    let stop = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const page = await session.api.requests(ep, { status: status || undefined, cursor });
        if (stop) return;
        setJobs(page.requests);
        setNext(page.nextCursor);
        setError(null);
      } catch (err) {
        if (stop) return;
        setError((err as Error).message);
        // /requests is rate limited (10 per 10 s by default): come back when the server says.
        if (err instanceof ApiError && err.status === 429) retry = setTimeout(load, (err.retryAfter ?? 1) * 1000);
      }
    };
    void load();
    return () => {
      stop = true;
      if (retry) clearTimeout(retry);
    };
  }, [ep, status, cursor, tick]);

  // Live: jobs on this page change in place; new jobs that match the filter appear on the first page.
  useEffect(
    () =>
      session.hub.on((e) => {
        if (e.endpointId !== ep) return;
        if (e.type === "purged") return setTick((t) => t + 1); // its queued jobs are gone: read the page again
        if (!e.job) return;
        const changed = e.job;
        setJobs((list) => {
          if (!list) return list;
          const at = list.findIndex((j) => j.id === changed.id);
          if (at >= 0) return list.map((j, i) => (i === at ? { ...j, ...changed } : j));
          if (cursor !== undefined || (status && status !== changed.status)) return list;
          return [changed, ...list].slice(0, 20);
        });
      }),
    [ep, status, cursor],
  );

  return (
    <>
      <h1>
        {ep} <span class="muted">jobs</span>
      </h1>
      <p class="actions">
        <a class="button" href={`#/endpoints/${encodeURIComponent(ep)}/playground`}>
          Playground
        </a>
        <PurgeButton session={session} ep={ep} />
      </p>
      <div class="toolbar">
        <label for="status-filter">Status</label>
        <select
          id="status-filter"
          value={status}
          onChange={(e) => {
            setStatus(e.currentTarget.value);
            setCursors([undefined]);
          }}
        >
          <option value="">all</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <button type="button" disabled={cursors.length === 1} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button type="button" disabled={!next} onClick={() => setCursors([...cursors, next])}>
          Older
        </button>
        <span class="muted">page {cursors.length}</span>
      </div>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {jobs && jobs.length === 0 && (
        <p>
          No {status || ""} jobs{status ? "" : " yet"}.
        </p>
      )}
      {jobs && jobs.length > 0 && (
        <table class="jobs">
          <caption class="sr-only">Recent jobs of {ep}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Delay</th>
              <th scope="col">Execution</th>
              <th scope="col">Worker</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => (
              <tr key={j.id} data-job={j.id}>
                <td>
                  <a href={`#/endpoints/${encodeURIComponent(ep)}/jobs/${encodeURIComponent(j.id)}`}>{j.id}</a>
                </td>
                <td>
                  <span class={`status s-${j.status}`} data-status={j.status}>
                    {j.status}
                  </span>
                </td>
                <td>{clock(j.createdAt)}</td>
                <td>{ms(j.delayTime)}</td>
                <td>{ms(j.executionTime)}</td>
                <td class="mono">{j.workerId ?? "–"}</td>
                <td>
                  <CancelButton session={session} ep={ep} id={j.id} status={j.status} />{" "}
                  <RetryButton session={session} ep={ep} id={j.id} status={j.status} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <WorkerLog session={session} ep={ep} />
    </>
  );
}
