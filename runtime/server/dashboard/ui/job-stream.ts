import { useEffect, useState } from "preact/hooks";
import type { Api, JobLogLine, JobSummary } from "./api.ts";

/** A job as its server-sent events describe it: the last status answer and every chunk so far. */
export interface LiveJob {
  status: JobSummary | null;
  chunks: Array<{ output: unknown; metrics?: unknown }>;
  /** The lines the job's handler printed and logged, oldest first. */
  logs: JobLogLine[];
  /** Set when the stream could not be followed (the job is gone, or the key may not read it). */
  error: string | null;
  ended: boolean;
}

const FINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);

/**
 * Follows GET /v2/<ep>/stream/<id> with Accept: text/event-stream: each chunk, log line and
 * status change arrives as an event; a dropped connection resumes with Last-Event-ID. A new `run`
 * (the job was retried) follows it again from its new start.
 */
export function useJobStream(api: Api, ep: string, id: string | null, run = 0): LiveJob {
  const [live, setLive] = useState<LiveJob>({ status: null, chunks: [], logs: [], error: null, ended: false });
  useEffect(() => {
    setLive({ status: null, chunks: [], logs: [], error: null, ended: false });
    if (!id) return;
    const stop = new AbortController();
    let done = false;
    api
      .follow(
        `/v2/${encodeURIComponent(ep)}/stream/${encodeURIComponent(id)}`,
        (e) => {
          const data = JSON.parse(e.data);
          if (e.event === "chunk") setLive((l) => ({ ...l, chunks: [...l.chunks, data] }));
          else if (e.event === "log") setLive((l) => ({ ...l, logs: [...l.logs, data] }));
          else if (e.event === "status") {
            done = FINAL.has(data.status);
            setLive((l) => ({ ...l, status: data, ended: done }));
          } else if (e.event === "gone") {
            done = true;
            setLive((l) => ({ ...l, error: data.error, ended: true }));
          }
        },
        stop.signal,
        () => done,
      )
      .then(
        () => setLive((l) => ({ ...l, ended: true })),
        (err: Error) => setLive((l) => ({ ...l, error: err.message, ended: true })),
      );
    return () => stop.abort();
  }, [api, ep, id, run]);
  return live;
}
