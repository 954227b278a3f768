import type { Log } from "../log.ts";

/** Attribute values a span takes. */
export type SpanAttributes = Record<string, string | number | boolean>;

/** A span begun with Tracing.start. */
export interface StartedSpan {
  /** The span's own W3C traceparent: what its children name as their parent. */
  readonly traceparent: string;
  set(attributes: SpanAttributes): void;
  /** Marks the span failed, with what went wrong. */
  fail(message: string): void;
  end(): void;
}

/** The traces of this process (OpenTelemetry, exported over OTLP/HTTP). */
export interface Tracing {
  /** A span begun now under `parent` (a W3C traceparent), or at the root of a new trace when there is none. */
  start(name: string, parent: string | undefined, attributes?: SpanAttributes, kind?: "server" | "client"): StartedSpan;
  /** A span that has already happened, from `start` to `end` (epoch ms), under `parent`. */
  record(name: string, parent: string, start: number, end: number, attributes?: SpanAttributes, error?: string): void;
  /** Runs `fn` in a span under `parent`, made active: log lines and spans begun inside it are its. */
  run<T>(name: string, parent: string | undefined, attributes: SpanAttributes, fn: (span: StartedSpan) => Promise<T>): Promise<T>;
  /** Runs `fn` in a span under the active one (a handler's ctx.span). */
  child<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
  /** The active span's ids, for log lines. */
  active(): { trace_id: string; span_id: string } | undefined;
  /** Sends what is left and stops. */
  shutdown(): Promise<void>;
}

/**
 * This process's tracing, or undefined while it is off: the one check a job's path makes. Set
 * once by startTracing, before the server listens or the worker takes a job.
 */
export let tracing: Tracing | undefined;

/** Whether the environment asks for traces (an OTLP endpoint for all signals, or for traces). */
export const tracingWanted = (env: Record<string, string | undefined>): boolean =>
  Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) && env.OTEL_SDK_DISABLED !== "true";

/**
 * Turns tracing on when the environment asks for it, loading the OpenTelemetry packages only
 * then. When they are not installed, or the protocol is not one Spool speaks, it logs one warning
 * and tracing stays off.
 */
export async function startTracing(options: {
  /** service.name when OTEL_SERVICE_NAME is not set. */
  service: string;
  /** More resource attributes of this process (spool.worker.id). */
  resource?: SpanAttributes;
  log: Log;
  env?: Record<string, string | undefined>;
}): Promise<Tracing | undefined> {
  const env = options.env ?? process.env;
  if (tracing || !tracingWanted(env)) return tracing;
  try {
    const { openTelemetryTracing } = await import("./otel-tracing.ts");
    tracing = await openTelemetryTracing({ service: options.service, resource: options.resource ?? {}, env });
  } catch (err) {
    options.log.warn(`traces are off: ${(err as Error).message}`);
  }
  return tracing;
}

/** Sends the spans not yet sent and turns tracing off (a process about to exit). */
export async function stopTracing(): Promise<void> {
  const t = tracing;
  tracing = undefined;
  await t?.shutdown().catch(() => {});
}
