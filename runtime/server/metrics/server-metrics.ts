import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config/config.ts";
import type { JobEvent, JobEvents } from "../jobs/job-events.ts";
import type { Store } from "../store/store.ts";
import type { ScalerView } from "../scaling/scaler-view.ts";
import { scalingSignal } from "../scaling/scaling-signal.ts";
import type { WebhookOutcome } from "../webhooks/webhook-sender.ts";

/** Seconds, from a fast job's queue wait up to an hour-long generation. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** prom-client's per-heap-space gauges, left out: see the constructor. */
const HEAP_SPACE_METRICS = [
  "nodejs_heap_space_size_total_bytes",
  "nodejs_heap_space_size_used_bytes",
  "nodejs_heap_space_size_available_bytes",
];

const PER_SERVER = "Counted by this server (with several servers, sum over them).";
const SHARED = "Read from the store at scrape time: the same on every server sharing it.";

/**
 * Counts by label values, kept as plain numbers and handed to a prom-client counter only when
 * scraped: a count costs a map lookup instead of prom-client's hashing of its labels (there is
 * one count per request and two per job).
 */
class Tally<L extends string> {
  readonly #counts = new Map<string, { labels: Record<L, string>; n: number }>();

  /** Adds `n` under `key`, which names the label values that `labels` makes (called once per key). */
  add(key: string, labels: () => Record<L, string>, n = 1): void {
    const t = this.#counts.get(key);
    if (t) t.n += n;
    else this.#counts.set(key, { labels: labels(), n });
  }

  /** Sets the counter to the tally (its collect hook). */
  copyTo(counter: Counter<L>): void {
    counter.reset();
    for (const { labels, n } of this.#counts.values()) counter.inc(labels, n);
  }
}

/** What the metrics read and listen to. */
export interface MetricsDeps {
  store: Store;
  config: Config;
  clock: Clock;
  jobEvents: JobEvents;
}

/**
 * What a scrape reads besides the store. The scaler and the start failures count into the metrics
 * as they are made, so they are handed over at scrape time rather than at construction.
 */
export interface ScrapeReads {
  /** This server's scaler: its initializing and stopping workers, and a held scale-up. */
  scaler?: Pick<ScalerView, "initializing" | "stopping" | "held">;
  /** Whether the endpoint's workers keep failing to start (its scaling signal asks for one). */
  startFailures?: { retrying(endpointId: string): boolean };
}

/**
 * The Prometheus metrics of one server, in a registry of its own (several apps in one process
 * never collide). Counters are fed by the job events and by the scaler's and webhook sender's
 * hooks; queue gauges are read from store.health (O(1) in queue depth) when scraped.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly #deps: MetricsDeps;
  readonly #off: () => void;

  readonly #submitted = new Tally<"endpoint">();
  readonly #retried: Counter<"endpoint">;
  readonly #purged: Counter<"endpoint">;
  readonly #ended = new Tally<"endpoint" | "status">();
  readonly #refused: Counter<"endpoint" | "reason">;
  readonly #delay: Histogram<"endpoint">;
  readonly #execution: Histogram<"endpoint">;
  readonly #scaleUps: Counter<"endpoint">;
  readonly #scaleDowns: Counter<"endpoint">;
  readonly #startFailures: Counter<"endpoint">;
  readonly #webhooks: Counter<"outcome">;
  readonly #http = new Tally<"method" | "route" | "status">();
  readonly #queueDepth: Gauge<"endpoint">;
  readonly #inProgress: Gauge<"endpoint">;
  readonly #workers: Gauge<"endpoint" | "state">;
  readonly #oldestAge: Gauge<"endpoint">;
  readonly #desired: Gauge<"endpoint">;
  readonly #held: Gauge<"endpoint" | "reason">;
  readonly #leaseHeld: Gauge;

  constructor(deps: MetricsDeps) {
    this.#deps = deps;
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[], tally?: Tally<L>) =>
      new Counter<L>({
        name,
        help,
        labelNames,
        registers,
        ...(tally && {
          collect(this: Counter<L>) {
            tally.copyTo(this);
          },
        }),
      });
    const gauge = <L extends string>(name: string, help: string, labelNames: L[]) => new Gauge<L>({ name, help, labelNames, registers });
    const histogram = (name: string, help: string) =>
      new Histogram<"endpoint">({ name, help, labelNames: ["endpoint"], buckets: DURATION_BUCKETS, registers });

    counter(
      "spool_jobs_submitted_total",
      `Jobs accepted by /run, /runsync and the OpenAI routes. ${PER_SERVER}`,
      ["endpoint"],
      this.#submitted,
    );
    counter(
      "spool_jobs_ended_total",
      `Jobs that reached a final state (COMPLETED, FAILED, CANCELLED, TIMED_OUT); a retried job ends again. ${PER_SERVER}`,
      ["endpoint", "status"],
      this.#ended,
    );
    this.#retried = counter("spool_jobs_retried_total", `FAILED or TIMED_OUT jobs queued again by /retry. ${PER_SERVER}`, ["endpoint"]);
    this.#purged = counter("spool_jobs_purged_total", `Queued jobs removed by /purge-queue (they never end). ${PER_SERVER}`, ["endpoint"]);
    this.#refused = counter(
      "spool_requests_refused_total",
      `Requests answered 429, by reason: backpressure (queue full) or rate-limit. ${PER_SERVER}`,
      ["endpoint", "reason"],
    );
    this.#delay = histogram(
      "spool_job_delay_seconds",
      `Time from entering the queue to being taken by a worker, of jobs that ended. ${PER_SERVER}`,
    );
    this.#execution = histogram(
      "spool_job_execution_seconds",
      `Time from being taken to the final state, of jobs that ended. ${PER_SERVER}`,
    );
    this.#scaleUps = counter(
      "spool_scale_ups_total",
      `Workers started by the scaler. Counted by the server that runs scaling (the lease holder).`,
      ["endpoint"],
    );
    this.#startFailures = counter(
      "spool_worker_start_failures_total",
      `Workers that exited before they were ready (setup threw, handler missing, killed at start, ended at startTimeoutMs). Counted by the server whose worker failed (or that got its report).`,
      ["endpoint"],
    );
    this.#scaleDowns = counter(
      "spool_scale_downs_total",
      `Idle workers stopped by the scaler. Counted by the server that runs scaling (the lease holder).`,
      ["endpoint"],
    );
    this.#webhooks = counter(
      "spool_webhook_deliveries_total",
      `Webhook attempts by outcome: delivered, retried (failed, tried again later), given_up (failed for good). ${PER_SERVER}`,
      ["outcome"],
    );
    counter(
      "spool_http_requests_total",
      `HTTP requests answered, by method, route template and status. ${PER_SERVER}`,
      ["method", "route", "status"],
      this.#http,
    );
    this.#queueDepth = gauge("spool_queue_depth", `Jobs IN_QUEUE. ${SHARED}`, ["endpoint"]);
    this.#inProgress = gauge("spool_jobs_in_progress", `Jobs IN_PROGRESS. ${SHARED}`, ["endpoint"]);
    this.#workers = gauge(
      "spool_workers",
      `Workers by state: idle, running, unhealthy (from the store: shared), initializing (started by this server's scaler, not heard from yet), stopping (being ended by this server's scaler, not exited yet).`,
      ["endpoint", "state"],
    );
    this.#oldestAge = gauge(
      "spool_queue_oldest_age_seconds",
      `How long the oldest queued job (not lowPriority) has waited; 0 when none. ${SHARED}`,
      ["endpoint"],
    );
    this.#desired = gauge(
      "spool_desired_workers",
      `Workers the endpoint's scale rule wants now, clamped to workersMin..workersMax (what KEDA follows). ${SHARED}`,
      ["endpoint"],
    );
    this.#held = gauge(
      "spool_scale_up_held",
      `Workers the endpoint wants that the scaler cannot start, by reason (gpu: no GPU has room). Set by the server that runs scaling.`,
      ["endpoint", "reason"],
    );
    this.#leaseHeld = gauge(
      "spool_duties_lease_held",
      "1 while this server holds the duties lease (it runs housekeeping and scaling), else 0: with several servers, one shows 1.",
      [],
    );
    collectDefaultMetrics({ register: this.registry });
    // Bun's v8.getHeapSpaceStatistics walks the heap: 7 ms a scrape at 1k queued jobs, 29 ms at
    // 100k (scripts/bench/metrics.ts). The heap's total and used bytes stay (nodejs_heap_size_*).
    for (const name of HEAP_SPACE_METRICS) this.registry.removeSingleMetric(name);

    this.#off = deps.jobEvents.on((e) => this.#onJobEvent(e));
  }

  #onJobEvent(e: JobEvent): void {
    switch (e.type) {
      case "submitted":
        this.#submitted.add(e.job.endpointId, () => ({ endpoint: e.job.endpointId }));
        return;
      case "refused":
        this.#refused.inc({ endpoint: e.endpointId, reason: e.reason });
        return;
      case "retried":
        this.#retried.inc({ endpoint: e.job.endpointId });
        return;
      case "purged":
        this.#purged.inc({ endpoint: e.endpointId }, e.count);
        return;
      case "ended": {
        const { job } = e;
        const endpoint = job.endpointId;
        this.#ended.add(`${endpoint} ${job.status}`, () => ({ endpoint, status: job.status }));
        if (job.startedAt === undefined) return;
        this.#delay.observe({ endpoint }, Math.max(0, job.startedAt - job.queuedAt) / 1000);
        if (job.completedAt !== undefined) this.#execution.observe({ endpoint }, Math.max(0, job.completedAt - job.startedAt) / 1000);
        return;
      }
    }
  }

  /** The scaler started (up) or stopped an idle (down) worker. */
  scaled(endpointId: string, direction: "up" | "down"): void {
    (direction === "up" ? this.#scaleUps : this.#scaleDowns).inc({ endpoint: endpointId });
  }

  /** A worker of the endpoint exited before it was ready. */
  startFailed(endpointId: string): void {
    this.#startFailures.inc({ endpoint: endpointId });
  }

  /** Whether the last try for the duties lease got it. */
  leaseHeld(held: boolean): void {
    this.#leaseHeld.set(held ? 1 : 0);
  }

  /** A webhook attempt ended this way. */
  webhook(outcome: WebhookOutcome): void {
    this.#webhooks.inc({ outcome });
  }

  /** One HTTP request answered; `route` is a route template, never a raw path. */
  httpRequest(method: string, route: string, status: number): void {
    this.#http.add(`${method} ${status} ${route}`, () => ({ method, route, status: String(status) }));
  }

  /** The text exposition, with the queue gauges read from the store (and `reads`) now. */
  async exposition(reads: ScrapeReads = {}): Promise<string> {
    const { store, config, clock } = this.#deps;
    const { scaler } = reads;
    const now = clock.now();
    for (const endpoint of Object.keys(config.endpoints)) {
      const health = await store.health(endpoint, now, config.server.workerLossTimeoutMs);
      this.#queueDepth.set({ endpoint }, health.jobs.inQueue);
      this.#inProgress.set({ endpoint }, health.jobs.inProgress);
      const stopping = scaler?.stopping(endpoint) ?? 0;
      // A stopping process is not idle, whatever its last heartbeat said.
      this.#workers.set({ endpoint, state: "idle" }, Math.max(0, health.workers.idle - stopping));
      this.#workers.set({ endpoint, state: "stopping" }, stopping);
      this.#workers.set({ endpoint, state: "running" }, health.workers.running);
      this.#workers.set({ endpoint, state: "unhealthy" }, health.workers.unhealthy);
      this.#workers.set({ endpoint, state: "initializing" }, scaler?.initializing(endpoint) ?? 0);
      const signal = await scalingSignal({ ...this.#deps, ...reads }, endpoint, config.endpoints[endpoint]!);
      this.#oldestAge.set({ endpoint }, signal.oldestQueuedAgeSeconds);
      this.#desired.set({ endpoint }, signal.desiredWorkers);
      this.#held.set({ endpoint, reason: "gpu" }, scaler?.held(endpoint)?.workers ?? 0);
    }
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Stops listening to job events. */
  close(): void {
    this.#off();
  }
}
