import { Hono, type Context, type Next } from "hono";
import { isFinal } from "../../protocol/limits.ts";
import type { AppEnv, RouteDeps } from "../app-deps.ts";
import { HttpError, jobNotFound } from "../http/http-error.ts";
import { jobResponseJson } from "../jobs/job-view.ts";
import type { StoredJob } from "../store/store.ts";
import { eventStreamResponse } from "../http/event-stream.ts";
import { streamElement } from "./client-routes.ts";
import type { JobLogLine } from "../../protocol/job-log.ts";

/** Where a client is in a job's event stream; an event id is `<retries>.<chunks>.<status stamp>.<log lines>`. */
interface Position {
  retries: number;
  chunks: number;
  stamp: string | null;
  /** Log lines sent: they go on across retries, like the job's log. */
  logs: number;
}

/**
 * Server-sent events beside RunPod's polling: GET /status/<id> and /stream/<id> with
 * `Accept: text/event-stream` send each new chunk (`event: chunk`, data as a /stream element)
 * each line the handler logs (`event: log`, data as a line of /logs) and each change of the
 * status answer (`event: status`, data as /status) until the job ends, then close. Each event's id says where the client is, so a reconnect with Last-Event-ID gets
 * exactly the events it missed. Without that Accept header the requests go on to the polling
 * routes, unchanged. The stream holds its concurrent rate-limit slot until it ends.
 */
export function sseRoutes(deps: RouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const handle = (c: Context<AppEnv>, next: Next) => (wantsEvents(c.req.raw) ? jobEventStream(deps, c) : next());
  app.get("/status/:id", handle);
  app.get("/stream/:id", handle);
  return app;
}

/** A GET asking for events (a HEAD gets the polling answer's headers: a stream nobody reads would never end). */
export const wantsEvents = (req: Request) =>
  req.method === "GET" && (req.headers.get("accept") ?? "").toLowerCase().includes("text/event-stream");

/** A short digest of the status answer: a changed answer (state, progress, result) is a new event. */
function stampOf(job: StoredJob): string {
  return Bun.hash(jobResponseJson(job)).toString(36);
}

function parseLastEventId(value: string | undefined): Position | null {
  if (value === undefined || value === "") return null;
  // The log count is optional: ids written before there were log events have none.
  const m = /^(\d{1,9})\.(\d{1,9})\.([0-9a-z]{1,16})(?:\.(\d{1,9}))?$/.exec(value);
  if (!m) throw new HttpError(400, `Last-Event-ID ${JSON.stringify(value.slice(0, 64))} is not an event id of this stream`);
  return { retries: Number(m[1]), chunks: Number(m[2]), stamp: m[3]!, logs: Number(m[4] ?? 0) };
}

async function jobEventStream(deps: RouteDeps, c: Context<AppEnv>): Promise<Response> {
  const { jobs, store, clock } = deps;
  const endpointId = c.get("endpointId");
  const id = c.req.param("id")!;
  if (c.req.query("ttl") !== undefined)
    throw new HttpError(400, "?ttl is not supported with Accept: text/event-stream; set it with a plain GET /status");
  const resumed = parseLastEventId(c.req.header("last-event-id"));
  const first = await store.get(endpointId, id, clock.now());
  if (!first) throw jobNotFound(id);
  // A retry starts the job's chunks over: a position from an earlier run starts from the beginning.
  let at: Position =
    resumed && resumed.retries === first.retries ? resumed : { retries: first.retries, chunks: 0, stamp: null, logs: resumed?.logs ?? 0 };

  const release = c.get("keepAdmission")?.() ?? (() => {});
  // As /status answers at that moment; a queued job's position is not an event of its own.
  const statusBody = async (job: StoredJob) => {
    const position = job.status === "IN_QUEUE" ? await store.queuePosition(endpointId, id, clock.now()) : null;
    return jobResponseJson(job, position === null ? undefined : { queuePosition: position });
  };
  const eventId = () => `${at.retries}.${at.chunks}.${at.stamp ?? "0"}.${at.logs}`;
  return eventStreamResponse(
    async (write, gone) => {
      const send = (event: string, json: string) => write(`event: ${event}\nid: ${eventId()}\ndata: ${json}\n\n`);
      for (;;) {
        const seen = at;
        // Log lines are read after the job, so a final state read comes with every line before it.
        let lines: JobLogLine[] = [];
        const r = await jobs.watch(
          endpointId,
          id,
          at.chunks,
          (job) => job.retries !== seen.retries || stampOf(job) !== seen.stamp || isFinal(job.status),
          deps.config.server.sseKeepAliveMs,
          gone,
          async () => {
            lines = (await store.readLogs(endpointId, id, seen.logs, clock.now()))?.lines ?? [];
            return lines.length > 0;
          },
        );
        if (gone.aborted) return;
        if (!r) {
          send("gone", JSON.stringify({ id, error: `job ${id} not found (purged or expired)` }));
          return;
        }
        if (r.job.retries !== at.retries) {
          at = { retries: r.job.retries, chunks: 0, stamp: at.stamp, logs: at.logs };
          continue;
        }
        for (const chunk of r.chunks) {
          at = { ...at, chunks: at.chunks + 1 };
          send("chunk", JSON.stringify(streamElement(chunk)));
        }
        for (const line of lines) {
          at = { ...at, logs: at.logs + 1 };
          send("log", JSON.stringify(line));
        }
        const stamp = stampOf(r.job);
        if (stamp !== at.stamp) {
          at = { ...at, stamp };
          send("status", await statusBody(r.job));
        } else if (!r.chunks.length && !lines.length) write(": keepalive\n\n");
        if (isFinal(r.job.status)) return;
      }
    },
    { release },
  );
}
