import type { Clock } from "../../clock.ts";
import type { JobEvent, JobEvents } from "../jobs/job-events.ts";
import type { EndedJob } from "../store/store.ts";

/** Recent figures of one endpoint, from the jobs that ended on this server. */
export interface EndpointStats {
  endpointId: string;
  /** Jobs ended in the last 60 s. */
  jobsPerMinute: number;
  /** Of jobs ended in the last 15 min (null when none had one). */
  delayMs: { p50: number | null; p95: number | null };
  executionMs: { p50: number | null; p95: number | null };
  /** One entry per minute of the last 30, oldest first; `minute` is its start (epoch ms). */
  series: Array<{ minute: number; ended: number; failed: number; delayP50: number | null; executionP50: number | null }>;
}

const MINUTE = 60_000;
const SERIES_MINUTES = 30;
const PERCENTILE_MINUTES = 15;

/** Durations counted by value, rounded to 3 significant digits: exact below 1 s, within 0.5% above, bounded in size. */
type Counts = Map<number, number>;

interface MinuteBucket {
  minute: number;
  ended: number;
  failed: number;
  delay: Counts;
  execution: Counts;
}

interface EndpointWindow {
  /** Newest last; none older than SERIES_MINUTES. */
  minutes: MinuteBucket[];
  /** Ends per second of the last 60 s: [second, count], newest last. */
  seconds: Array<[number, number]>;
}

function round3(ms: number): number {
  if (ms < 1000) return Math.max(0, Math.round(ms));
  const scale = 10 ** (Math.floor(Math.log10(ms)) - 2);
  return Math.round(ms / scale) * scale;
}

function add(counts: Counts, ms: number): void {
  const v = round3(ms);
  counts.set(v, (counts.get(v) ?? 0) + 1);
}

/** Nearest-rank percentiles over several count maps: the smallest value with at least p% of values at or below it. */
function percentiles(maps: Counts[], ps: number[]): (number | null)[] {
  const merged = new Map<number, number>();
  let total = 0;
  for (const m of maps) {
    for (const [v, n] of m) {
      merged.set(v, (merged.get(v) ?? 0) + n);
      total += n;
    }
  }
  if (total === 0) return ps.map(() => null);
  const sorted = [...merged].sort((a, b) => a[0] - b[0]);
  return ps.map((p) => {
    const rank = Math.max(1, Math.ceil((p / 100) * total));
    let seen = 0;
    for (const [v, n] of sorted) {
      seen += n;
      if (seen >= rank) return v;
    }
    return sorted.at(-1)![0];
  });
}

const isFailure = (job: EndedJob) => job.status === "FAILED" || job.status === "TIMED_OUT";

/**
 * Per-endpoint throughput, delay and execution percentiles and a 30-minute series, kept in
 * memory from the "ended" job events of this server (with several servers, each its own).
 * Memory is bounded: one bucket per minute per endpoint, durations counted by rounded value.
 */
export class EndpointStatsRecorder {
  readonly #clock: Clock;
  readonly #windows = new Map<string, EndpointWindow>();
  readonly #off: () => void;

  constructor(events: JobEvents, clock: Clock) {
    this.#clock = clock;
    this.#off = events.on((e) => this.#record(e));
  }

  #record(e: JobEvent): void {
    if (e.type !== "ended") return;
    const { job } = e;
    const now = this.#clock.now();
    let w = this.#windows.get(job.endpointId);
    if (!w) this.#windows.set(job.endpointId, (w = { minutes: [], seconds: [] }));
    this.#prune(w, now);
    const minute = Math.floor(now / MINUTE) * MINUTE;
    let bucket = w.minutes.at(-1);
    if (!bucket || bucket.minute !== minute) {
      bucket = { minute, ended: 0, failed: 0, delay: new Map(), execution: new Map() };
      w.minutes.push(bucket);
    }
    bucket.ended++;
    if (isFailure(job)) bucket.failed++;
    if (job.startedAt !== undefined) {
      add(bucket.delay, job.startedAt - job.queuedAt);
      if (job.completedAt !== undefined) add(bucket.execution, job.completedAt - job.startedAt);
    }
    const second = Math.floor(now / 1000);
    const last = w.seconds.at(-1);
    if (last && last[0] === second) last[1]++;
    else w.seconds.push([second, 1]);
  }

  #prune(w: EndpointWindow, now: number): void {
    const oldestMinute = Math.floor(now / MINUTE) * MINUTE - (SERIES_MINUTES - 1) * MINUTE;
    while (w.minutes.length && w.minutes[0]!.minute < oldestMinute) w.minutes.shift();
    const oldestSecond = Math.floor(now / 1000) - 59;
    while (w.seconds.length && w.seconds[0]![0] < oldestSecond) w.seconds.shift();
  }

  /** The endpoint's figures as of now (zeros and nulls when no job ended lately). */
  get(endpointId: string): EndpointStats {
    const now = this.#clock.now();
    const w = this.#windows.get(endpointId) ?? { minutes: [], seconds: [] };
    this.#prune(w, now);
    const current = Math.floor(now / MINUTE) * MINUTE;
    const recent = w.minutes.filter((b) => b.minute > current - PERCENTILE_MINUTES * MINUTE);
    const [delayP50, delayP95] = percentiles(
      recent.map((b) => b.delay),
      [50, 95],
    );
    const [execP50, execP95] = percentiles(
      recent.map((b) => b.execution),
      [50, 95],
    );
    const byMinute = new Map(w.minutes.map((b) => [b.minute, b]));
    const series: EndpointStats["series"] = [];
    for (let i = SERIES_MINUTES - 1; i >= 0; i--) {
      const minute = current - i * MINUTE;
      const b = byMinute.get(minute);
      series.push({
        minute,
        ended: b?.ended ?? 0,
        failed: b?.failed ?? 0,
        delayP50: b ? percentiles([b.delay], [50])[0]! : null,
        executionP50: b ? percentiles([b.execution], [50])[0]! : null,
      });
    }
    return {
      endpointId,
      jobsPerMinute: w.seconds.reduce((sum, [, n]) => sum + n, 0),
      delayMs: { p50: delayP50!, p95: delayP95! },
      executionMs: { p50: execP50!, p95: execP95! },
      series,
    };
  }

  /** Stops listening to job events. */
  close(): void {
    this.#off();
  }
}
