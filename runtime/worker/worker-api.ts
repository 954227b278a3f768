import type { Clock } from "../clock.ts";
import type { Log } from "../log.ts";
import { LONG_POLL_MAX_MS, MAX_TAKE_BATCH } from "../protocol/limits.ts";
import type { TakenJob } from "../protocol/worker-wire.ts";
import type { JobLogLine, JobLogPost, JobLogPostAnswer } from "../protocol/job-log.ts";
import type { WorkerEndpoints } from "./worker-urls.ts";

/** Waits before each retry of a result post (runpod-python: +2 s, +3 s). */
const RESULT_RETRY_MS = [1_000, 2_000, 3_000];
/** A long-poll may be held this much past the longest wait a server allows before it counts as hung. */
const LONG_POLL_MARGIN_MS = 10_000;
/** After a take the server refused (4xx), the worker waits this long, doubling up to the cap. */
const REFUSED_TAKE_BACKOFF_MS = [1_000, 30_000] as const;

/** Timeouts of worker requests: a server that hangs (stopped, partitioned) never silences the worker. */
export interface RequestTimeouts {
  /** Ping, result, progress, stream, upload. @default 30000 */
  requestMs: number;
  /** job-take and the stop channel: the longest server wait plus a margin. @default 95000 */
  longPollMs: number;
}

export const DEFAULT_TIMEOUTS: RequestTimeouts = { requestMs: 30_000, longPollMs: LONG_POLL_MAX_MS + LONG_POLL_MARGIN_MS };

/** The worker side of the protocol over HTTP. */
export class WorkerApi {
  constructor(
    private readonly urls: WorkerEndpoints,
    private readonly apiKey: string,
    private readonly clock: Clock,
    private readonly log: Log,
    private readonly timeouts: RequestTimeouts = DEFAULT_TIMEOUTS,
  ) {}

  #refusedTakes = 0;

  #signal(ms: number, signal?: AbortSignal): AbortSignal {
    const timeout = AbortSignal.timeout(ms);
    return signal ? AbortSignal.any([signal, timeout]) : timeout;
  }

  #headers(json: boolean): Record<string, string> {
    // The key goes bare, as runpod-python sends it; the server accepts both forms.
    const h: Record<string, string> = { authorization: this.apiKey };
    if (json) h["content-type"] = "application/json";
    return h;
  }

  /** Takes up to `max` jobs, long-polling; [] when there are none or the server is unreachable. */
  async take(max: number, inProgress: boolean, signal: AbortSignal): Promise<TakenJob[]> {
    const size = Math.min(max, MAX_TAKE_BATCH);
    const url = size > 1 ? this.urls.takeBatch(size, inProgress) : this.urls.take(inProgress);
    let res: Response;
    try {
      res = await fetch(url, { headers: this.#headers(false), signal: this.#signal(this.timeouts.longPollMs, signal) });
    } catch (err) {
      if (signal.aborted) return [];
      this.log.warn("job-take failed; retrying in 1 s", { error: String(err) });
      await this.clock.sleep(1_000, signal);
      return [];
    }
    if (res.status === 204) return [];
    if (res.status === 429) {
      await this.clock.sleep(5_000, signal);
      return [];
    }
    if (res.status >= 400 && res.status < 500) {
      // A refusal does not go away by asking again at once: log it and back off.
      const [first, cap] = REFUSED_TAKE_BACKOFF_MS;
      const wait = Math.min(cap, first * 2 ** Math.min(this.#refusedTakes++, 5));
      this.log.warn("job-take refused; backing off", { status: res.status, body: (await res.text()).slice(0, 200), waitMs: wait });
      await this.clock.sleep(wait, signal);
      return [];
    }
    this.#refusedTakes = 0;
    if (!res.ok) {
      this.log.warn("job-take answered an error; retrying in 1 s", { status: res.status, body: (await res.text()).slice(0, 200) });
      await this.clock.sleep(1_000, signal);
      return [];
    }
    const body = (await res.json()) as TakenJob | TakenJob[];
    return Array.isArray(body) ? body : [body];
  }

  /**
   * Posts a body, retrying on network errors and 5xx only. The server treats repeats as no-ops,
   * so a retry after a post that landed changes nothing.
   */
  async #post(url: string, body: unknown, what: string): Promise<boolean> {
    return (await this.#postFor(url, body, what)) !== null;
  }

  /** #post, answering the body of the server's answer (null: not sent, or refused). */
  async #postFor(url: string, body: unknown, what: string, quietRefusal = false): Promise<string | null> {
    let text: string;
    try {
      text = typeof body === "string" ? body : JSON.stringify(body);
    } catch (err) {
      // A progress value JSON cannot carry (a BigInt, a cycle): nothing to post.
      this.log.error(`${what} not sent: its value cannot be sent as JSON`, { error: String(err) });
      return null;
    }
    for (let attempt = 0; ; attempt++) {
      let problem: string;
      try {
        const res = await fetch(url, {
          method: "POST",
          headers: this.#headers(true),
          body: text,
          signal: this.#signal(this.timeouts.requestMs),
        });
        if (res.ok) return await res.text();
        problem = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
        if (res.status < 500) {
          if (!quietRefusal) this.log.error(`${what} refused`, { problem });
          return null;
        }
      } catch (err) {
        problem = String(err);
      }
      const wait = RESULT_RETRY_MS[attempt];
      if (wait === undefined) {
        this.log.error(`${what} failed after ${attempt + 1} attempts`, { problem });
        return null;
      }
      this.log.warn(`${what} failed; retrying`, { problem, attempt: attempt + 1 });
      await this.clock.sleep(wait);
    }
  }

  /** Posts a job's result: `text` is the JSON of {output} or {error} (see resultBody). */
  done(jobId: string, text: string, isStream: boolean): Promise<boolean> {
    return this.#post(this.urls.done(jobId, isStream), text, `job-done ${jobId}`);
  }

  progress(jobId: string, value: unknown): Promise<boolean> {
    return this.#post(this.urls.done(jobId, false), { status: "IN_PROGRESS", output: value }, `progress ${jobId}`);
  }

  stream(jobId: string, chunk: unknown): Promise<boolean> {
    return this.#post(this.urls.stream(jobId), { output: chunk }, `job-stream ${jobId}`);
  }

  /**
   * Posts log lines of a job (Spool's job-log route); null when the server took none (the job is
   * no longer running here, or the server has no such route): no more are sent for that job.
   */
  async logs(jobId: string, lines: JobLogLine[]): Promise<{ truncated: boolean } | null> {
    const url = this.urls.log(jobId);
    if (!url) return null;
    const answer = await this.#postFor(url, { logs: lines } satisfies JobLogPost, `job-log ${jobId}`, true);
    if (answer === null) return null;
    try {
      return { truncated: (JSON.parse(answer) as JobLogPostAnswer).truncated === true };
    } catch {
      return null;
    }
  }

  async ping(runningIds: string[]): Promise<void> {
    try {
      await fetch(this.urls.ping(runningIds), { headers: this.#headers(false), signal: this.#signal(this.timeouts.requestMs) });
    } catch (err) {
      this.log.warn("ping failed", { error: String(err) });
    }
  }

  /** Tells the server this worker cannot start (its setup failed) and why, before it exits; `permanent`: a retry will not help. */
  async reportStartFailure(reason: string, permanent = false): Promise<void> {
    try {
      const url = `${this.urls.ping([])}&status=start_failed&reason=${encodeURIComponent(reason.slice(0, 2000))}${permanent ? "&permanent=1" : ""}`;
      await (await fetch(url, { headers: this.#headers(false), signal: AbortSignal.timeout(5_000) })).body?.cancel();
    } catch (err) {
      this.log.warn("could not report the start failure", { error: String(err) });
    }
  }

  /** Long-polls the stop channel; the ids of jobs to stop, [] when none. */
  async stops(signal: AbortSignal): Promise<string[]> {
    const started = this.clock.now();
    try {
      const res = await fetch(this.urls.stop(), { headers: this.#headers(false), signal: this.#signal(this.timeouts.longPollMs, signal) });
      if (res.status === 200) return ((await res.json()) as { jobsToStop?: string[] }).jobsToStop ?? [];
    } catch {
      if (signal.aborted) return [];
    }
    // A server that does not hold the poll open (or is down) is asked again after 1 s.
    if (this.clock.now() - started < 500) await this.clock.sleep(1_000, signal);
    return [];
  }

  /** Stores a file through the queue server's file store; returns its signed URL. */
  async upload(jobId: string, name: string, data: Blob, contentType: string): Promise<string> {
    const res = await fetch(this.urls.file(jobId, name), {
      method: "PUT",
      headers: { ...this.#headers(false), "content-type": contentType },
      body: data,
      signal: this.#signal(this.timeouts.requestMs),
    });
    const body = (await res.json().catch(() => ({}))) as { url?: string; error?: string };
    if (!res.ok || !body.url) throw new Error(`upload of ${name} failed: HTTP ${res.status} ${body.error ?? ""}`.trim());
    return body.url;
  }
}
