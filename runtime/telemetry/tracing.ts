import type { SpanAttributes, Tracing } from "./tracing-types.ts";

export type { SpanAttributes, StartedSpan, Tracing } from "./tracing-types.ts";

/** Where startTracing says why traces stay off (a Log, without importing the log, which imports this). */
interface Warner {
  warn(message: string, fields?: Record<string, unknown>): void;
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
  log: Warner;
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
