/** The page's client of the server: the same /v2 job API as any client, with the signed-in key. */
import type { HealthResponse, JobResponse, JobState, PurgeResponse, RequestsPage } from "../../../protocol/job-response.ts";
import type { EndpointStats } from "../../metrics/endpoint-stats.ts";

const KEY_ITEM = "spool-api-key";

/** The key lives in this tab's session storage only: never in a URL or a cookie. */
export const savedKey = {
  get: (): string | null => sessionStorage.getItem(KEY_ITEM),
  set: (key: string) => sessionStorage.setItem(KEY_ITEM, key),
  clear: () => sessionStorage.removeItem(KEY_ITEM),
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export interface KeyInfo {
  name: string;
  scope: "full" | "client" | "worker" | "read-only";
  endpoints: string[] | null;
}

export interface EndpointInfo {
  id: string;
  handler: string | null;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  executionTimeout: number;
  scalerType: string;
  scalerValue: number;
  /** Failed worker starts in a row before onStartFailure applies. */
  startFailureLimit: number;
  /** How long starts must have failed, with none ready, before onStartFailure applies (bar permanent failures). */
  startFailureWindowMs: number;
  /** fail: queued jobs fail and submissions are refused at the limit; queue: they keep waiting. */
  onStartFailure: "fail" | "queue";
  inputSchema: JsonSchema | null;
}

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  description?: string;
  examples?: unknown[];
  additionalProperties?: unknown;
}

/** Wire types as the server defines them (type imports: nothing of the server is bundled). */
export type { EndpointStats };
export type Health = HealthResponse;

/** A job as /status and the rows of /requests show it. */
export type JobSummary = JobResponse & { createdAt?: string; sync?: boolean };

export interface JobDetail extends JobSummary {
  input?: unknown;
  inputHidden?: string;
  progress?: unknown;
  queuedAt?: string;
  startedAt?: string;
  completedAt?: string;
  expiresAt?: string;
  policy?: { executionTimeout: number; lowPriority: boolean; ttl: number };
  retries?: number;
  losses?: number;
  stream?: Array<{ output: unknown; metrics?: unknown }>;
  streamChunks?: number;
}

/** A line of a job's log (GET /logs, SSE `log`). */
export interface JobLogLine {
  time: number;
  level: string;
  message: string;
}

/** A line about a worker this server started. */
export interface WorkerLogLine {
  time: number;
  workerId: string;
  message: string;
}

export interface ServerEvent {
  event: string;
  id?: string;
  data: string;
}

/** Calls the server with the key as a Bearer token; a non-2xx answer throws its `error`. */
export class Api {
  /** Told of every 401: the key may have been revoked (or this call is out of its scope). */
  onUnauthorized?: () => void;

  constructor(readonly key: string) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      if (res.status === 401) this.onUnauthorized?.();
      const retryAfter = Number(res.headers.get("retry-after")) || undefined;
      throw new ApiError(res.status, parsed?.error ?? `${res.status} ${res.statusText}`, retryAfter);
    }
    return parsed as T;
  }

  endpoints = () => this.call<{ key: KeyInfo; endpoints: EndpointInfo[] }>("GET", "/dashboard/api/endpoints");
  health = (ep: string) => this.call<HealthResponse>("GET", `/v2/${enc(ep)}/health`);
  stats = (ep: string) => this.call<EndpointStats>("GET", `/dashboard/api/endpoints/${enc(ep)}/stats`);
  requests = (ep: string, q: { status?: string; cursor?: string; limit?: number }) => {
    const params = new URLSearchParams({ limit: String(q.limit ?? 20) });
    if (q.status) params.set("status", q.status);
    if (q.cursor) params.set("cursor", q.cursor);
    return this.call<RequestsPage>("GET", `/v2/${enc(ep)}/requests?${params}`);
  };
  workerLog = (ep: string) => this.call<{ lines: WorkerLogLine[] }>("GET", `/dashboard/api/endpoints/${enc(ep)}/worker-log`);
  job = (ep: string, id: string) => this.call<JobDetail>("GET", `/dashboard/api/endpoints/${enc(ep)}/jobs/${enc(id)}`);
  run = (ep: string, input: unknown) => this.call<JobState>("POST", `/v2/${enc(ep)}/run`, { input });
  cancel = (ep: string, id: string) => this.call<JobState>("POST", `/v2/${enc(ep)}/cancel/${enc(id)}`);
  retry = (ep: string, id: string) => this.call<JobState>("POST", `/v2/${enc(ep)}/retry/${enc(id)}`);
  purge = (ep: string) => this.call<PurgeResponse>("POST", `/v2/${enc(ep)}/purge-queue`);

  /**
   * Follows a server-sent event stream until `signal` aborts or the server ends it with
   * `finished()` true, reconnecting with Last-Event-ID after a dropped connection. EventSource cannot send the key in a header,
   * so this reads the stream with fetch. Resolves when the server closed the stream normally.
   */
  async follow(path: string, onEvent: (e: ServerEvent) => void, signal: AbortSignal, finished: () => boolean = () => true): Promise<void> {
    let lastId: string | undefined;
    let delay = 500;
    while (!signal.aborted) {
      try {
        const res = await fetch(path, {
          headers: { authorization: `Bearer ${this.key}`, accept: "text/event-stream", ...(lastId ? { "last-event-id": lastId } : {}) },
          signal,
        });
        if (!res.ok || !res.body) {
          if (res.status === 401) this.onUnauthorized?.();
          const body = await res.text();
          let message = `${res.status}`;
          try {
            message = JSON.parse(body).error ?? message;
          } catch {}
          throw new ApiError(res.status, message);
        }
        delay = 500;
        await readEvents(res.body, (e) => {
          if (e.id !== undefined) lastId = e.id;
          onEvent(e);
        });
        // A stream cut before its last event (a restart, a proxy) resumes where it stopped.
        if (finished()) return;
        await new Promise((r) => setTimeout(r, delay));
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiError && err.status !== 429 && err.status < 500) throw err;
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 10_000);
      }
    }
  }
}

const enc = encodeURIComponent;

/** Parses a text/event-stream body (the WHATWG format), calling `onEvent` per dispatched event. */
async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (e: ServerEvent) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event: ServerEvent = { event: "message", data: "" };
  let hasData = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (hasData) onEvent({ ...event, data: event.data.replace(/\n$/, "") });
        event = { event: "message", data: "", id: event.id };
        hasData = false;
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") {
        event.data += `${val}\n`;
        hasData = true;
      } else if (field === "event") event.event = val;
      else if (field === "id") event.id = val;
    }
  }
}
