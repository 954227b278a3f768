import { useState } from "preact/hooks";
import type { EndpointInfo, EndpointStats, Health } from "./api.ts";
import { ApiError } from "./api.ts";
import type { Session } from "./session.ts";
import { StatsChart } from "./stats-chart.tsx";
import { useLiveRefresh } from "./use-live.ts";
import { ms } from "./format.ts";
import { PurgeButton } from "./actions.tsx";

/** Every endpoint the key may see: queue, workers, throughput and latency, live. */
export function Overview({ session }: { session: Session }) {
  return (
    <>
      <h1>Endpoints</h1>
      {session.endpoints.length === 0 && <p>This key may see no endpoint.</p>}
      <div class="cards">
        {session.endpoints.map((ep) => (
          <EndpointCard key={ep.id} session={session} endpoint={ep} />
        ))}
      </div>
    </>
  );
}

function EndpointCard({ session, endpoint }: { session: Session; endpoint: EndpointInfo }) {
  const [health, setHealth] = useState<Health | null>(null);
  const [stats, setStats] = useState<EndpointStats | null>(null);
  const [error, setError] = useState<string | null>(null);
  const ep = endpoint.id;
  useLiveRefresh(session.hub, ep, async () => {
    try {
      const [h, s] = await Promise.all([
        session.api.health(ep),
        session.api.stats(ep).catch((e) => (e instanceof ApiError && e.status === 404 ? null : Promise.reject(e))),
      ]);
      setHealth(h);
      setStats(s);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
      throw err;
    }
  });
  const headingId = `ep-${ep}`;
  return (
    <section class="card" aria-labelledby={headingId} data-endpoint={ep}>
      <h2 id={headingId}>
        <a href={`#/endpoints/${encodeURIComponent(ep)}`}>{ep}</a>
      </h2>
      <p class="muted">
        {endpoint.handler ?? "outside workers"} · workers {endpoint.workersMin}–{endpoint.workersMax} · {endpoint.scalerType}{" "}
        {endpoint.scalerValue}
      </p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {health?.lastStartError && <StartError endpoint={endpoint} report={health.lastStartError} />}
      <dl class="figures">
        <div>
          <dt>In queue</dt>
          <dd data-figure="inQueue">{health?.jobs.inQueue ?? "…"}</dd>
        </div>
        <div>
          <dt>In progress</dt>
          <dd data-figure="inProgress">{health?.jobs.inProgress ?? "…"}</dd>
        </div>
        <div>
          <dt>Completed</dt>
          <dd data-figure="completed">{health?.jobs.completed ?? "…"}</dd>
        </div>
        <div>
          <dt>Failed</dt>
          <dd data-figure="failed">{health?.jobs.failed ?? "…"}</dd>
        </div>
        <div>
          <dt>Jobs/min</dt>
          <dd data-figure="jobsPerMinute">{stats ? stats.jobsPerMinute : "–"}</dd>
        </div>
      </dl>
      <p class="workers">
        Workers:{" "}
        {health
          ? `${health.workers.initializing} initializing, ${health.workers.idle} idle, ${health.workers.running} running, ${health.workers.unhealthy} unhealthy`
          : "…"}
      </p>
      <p class="latency">
        Delay p50 {ms(stats?.delayMs.p50)} · p95 {ms(stats?.delayMs.p95)}
        <br />
        Execution p50 {ms(stats?.executionMs.p50)} · p95 {ms(stats?.executionMs.p95)}
      </p>
      {stats && <StatsChart stats={stats} label={`${ep}: median delay and execution time per minute, last 30 minutes`} />}
      <p class="actions">
        <a class="button" href={`#/endpoints/${encodeURIComponent(ep)}`}>
          Jobs
        </a>
        <a class="button" href={`#/endpoints/${encodeURIComponent(ep)}/playground`}>
          Playground
        </a>
        <PurgeButton session={session} ep={ep} />
      </p>
    </section>
  );
}

/** 300000 as "5 min", 90000 as "90 s". */
const duration = (ms: number) => (ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);

/** Why the endpoint's workers fail to start, and what it does with jobs meanwhile (the operator's choice). */
function StartError({ endpoint, report }: { endpoint: EndpointInfo; report: NonNullable<Health["lastStartError"]> }) {
  const policy = report.refusing
    ? "Queued jobs were failed and new submissions are refused until a worker starts."
    : endpoint.onStartFailure === "queue"
      ? "Jobs stay queued (this endpoint keeps them while workers fail to start)."
      : `Jobs stay queued until ${endpoint.startFailureLimit} failed starts in a row over ${duration(endpoint.startFailureWindowMs)}, then fail.`;
  return (
    <div role="alert" class="start-error" data-start-error>
      <strong>Workers cannot start</strong> ({report.attempts} failed {report.attempts === 1 ? "start" : "starts"}, last{" "}
      {new Date(report.at).toLocaleTimeString()})<pre>{report.message}</pre>
      <p>{policy}</p>
    </div>
  );
}
