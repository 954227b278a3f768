import type { Context } from "hono";
import type { AppDeps, AppEnv } from "../app-deps.ts";
import { HttpError } from "../http/http-error.ts";
import type { DashboardEvent } from "../../protocol/dashboard-event.ts";
import { jobResponse } from "../jobs/job-view.ts";
import type { JobEvent } from "../jobs/job-events.ts";

/** A stream ends after this long; the page reconnects (so no request is open without bound). */
const STREAM_MS = 30 * 60_000;
/** Most event streams open at once on one server. */
const MAX_STREAMS = 256;

/**
 * GET /dashboard/api/events: this server's job events (submitted, taken, ended, refused) of the
 * endpoints the key may see, as server-sent events, so every view of the page updates live
 * over one connection. Events carry the job's status answer without output or error.
 */
export function dashboardEvents(deps: AppDeps): (c: Context<AppEnv>) => Response {
  let open = 0;
  return (c) => {
    // A HEAD's body is never read, so its stream would never be cancelled.
    if (c.req.method !== "GET") throw new HttpError(405, "the event stream needs a GET", { allow: "GET" });
    // Each stream is a listener on every job event: their number is bounded.
    if (open >= MAX_STREAMS)
      throw new HttpError(429, `${MAX_STREAMS} dashboard event streams are open on this server; retry later`, { "retry-after": "5" });
    open++;
    let closed = false;
    return eventStream(deps, c, () => {
      if (!closed) open--;
      closed = true;
    });
  };
}

function eventStream(deps: AppDeps, c: Context<AppEnv>, onEnd: () => void): Response {
  const visible = c.get("key").endpoints;
  const encoder = new TextEncoder();
  let stop = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          stop();
        }
      };
      const off = deps.jobEvents.on((e) => {
        const endpointId = e.type === "refused" || e.type === "purged" ? e.endpointId : e.job.endpointId;
        if (visible && !visible.includes(endpointId)) return;
        write(`event: job\ndata: ${JSON.stringify(summary(e, endpointId))}\n\n`);
      });
      const keepalive = setInterval(() => write(": keepalive\n\n"), deps.config.server.sseKeepAliveMs);
      const end = setTimeout(() => {
        stop();
        controller.close();
      }, STREAM_MS);
      stop = () => {
        off();
        clearInterval(keepalive);
        clearTimeout(end);
        onEnd();
      };
      c.req.raw.signal.addEventListener("abort", () => stop(), { once: true });
      write("event: ready\ndata: {}\n\n");
    },
    cancel() {
      stop();
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
}

function summary(e: JobEvent, endpointId: string): DashboardEvent {
  if (e.type === "refused") return { type: e.type, endpointId, reason: e.reason };
  if (e.type === "purged") return { type: e.type, endpointId, count: e.count };
  const { error: _e, ...status } = jobResponse(e.job, { withOutput: false });
  return { type: e.type, endpointId, job: { ...status, createdAt: new Date(e.job.createdAt).toISOString(), sync: e.job.sync } };
}
