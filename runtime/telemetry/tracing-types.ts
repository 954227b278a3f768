/** What a tracing implementation offers; the OpenTelemetry one lives in otel-tracing.ts, loaded only when traces are on. */

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
