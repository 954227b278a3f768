import { useEffect, useState } from "preact/hooks";
import type { JobLogLine } from "./api.ts";
import type { Session } from "./session.ts";

const time = (ms: number) => new Date(ms).toLocaleTimeString();

/** A job's log lines, oldest first: time, level and message, each on a line of its own. */
export function JobLogLines({ lines }: { lines: JobLogLine[] }) {
  if (!lines.length) return <p class="muted">No lines yet. Workers of runpod-python send none.</p>;
  return (
    <ol class="log-lines" data-testid="job-logs">
      {lines.map((l, i) => (
        <li key={i} class={`log-${l.level}`}>
          <span class="muted">{time(l.time)}</span> <span class="log-level">{l.level}</span> <span class="log-message">{l.message}</span>
        </li>
      ))}
    </ol>
  );
}

/** The last lines about the endpoint's workers this server started (start, exit, error output), read again every 5 s. */
export function WorkerLog({ session, ep }: { session: Session; ep: string }) {
  const [lines, setLines] = useState<Array<{ time: number; workerId: string; message: string }>>([]);
  useEffect(() => {
    let stop = false;
    const load = () =>
      session.api.workerLog(ep).then(
        (r) => !stop && setLines(r.lines),
        () => {},
      );
    void load();
    const timer = setInterval(load, 5_000);
    return () => {
      stop = true;
      clearInterval(timer);
    };
  }, [ep]);
  return (
    <section aria-labelledby="worker-log-h">
      <h2 id="worker-log-h">Workers' own lines</h2>
      {lines.length === 0 ? (
        <p class="muted">None from workers this server started.</p>
      ) : (
        <ol class="log-lines" data-testid="worker-log">
          {lines.slice(-50).map((l, i) => (
            <li key={i}>
              <span class="muted">{time(l.time)}</span> <span class="mono">{l.workerId}</span> <span class="log-message">{l.message}</span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
