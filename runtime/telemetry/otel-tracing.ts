import { AsyncLocalStorage } from "node:async_hooks";
import type * as Api from "@opentelemetry/api";
import type * as Core from "@opentelemetry/core";
import type * as Resources from "@opentelemetry/resources";
import type * as TraceBase from "@opentelemetry/sdk-trace-base";
import type { SpanAttributes, StartedSpan, Tracing } from "./tracing-types.ts";

/**
 * Imports a package at run time only: the bundler does not follow a name held in a variable, so
 * `spool build` and a compiled server need none of these packages (they are optional).
 */
const loadAtRun = <T>(specifier: string): Promise<T> => import(specifier) as Promise<T>;

interface OtlpExporterModule {
  OTLPTraceExporter: new () => TraceBase.SpanExporter;
}

/** OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, as the spec reads it (http/protobuf when unset). */
function protocolOf(env: Record<string, string | undefined>): "http/json" | "http/protobuf" {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf").trim();
  if (protocol === "http/json" || protocol === "http/protobuf") return protocol;
  throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf or http/json`);
}

/** The W3C traceparent of a span context. */
const traceparentOf = (sc: Api.SpanContext) => `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;

/** A context manager on AsyncLocalStorage: the active span follows a handler's awaits. */
function asyncContextManager(api: typeof Api): Api.ContextManager {
  const storage = new AsyncLocalStorage<Api.Context>();
  const manager: Api.ContextManager = {
    active: () => storage.getStore() ?? api.ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
    bind: (ctx, target) =>
      (typeof target === "function"
        ? (...args: unknown[]) => storage.run(ctx, () => (target as (...a: unknown[]) => unknown)(...args))
        : target) as typeof target,
    enable: () => manager,
    disable: () => (storage.disable(), manager),
  };
  return manager;
}

/**
 * Tracing with the OpenTelemetry SDK: a BasicTracerProvider (sampler from OTEL_TRACES_SAMPLER),
 * a BatchSpanProcessor (OTEL_BSP_*) and the OTLP/HTTP exporter of the protocol asked for, which
 * reads its endpoint, headers and timeout from the OTEL_EXPORTER_OTLP_* variables itself.
 */
export async function openTelemetryTracing(options: {
  service: string;
  resource: SpanAttributes;
  env: Record<string, string | undefined>;
}): Promise<Tracing> {
  const { env } = options;
  const protocol = protocolOf(env);
  let api: typeof Api, core: typeof Core, resources: typeof Resources, base: typeof TraceBase, exporterModule: OtlpExporterModule;
  try {
    [api, core, resources, base, exporterModule] = await Promise.all([
      loadAtRun<typeof Api>("@opentelemetry/api"),
      loadAtRun<typeof Core>("@opentelemetry/core"),
      loadAtRun<typeof Resources>("@opentelemetry/resources"),
      loadAtRun<typeof TraceBase>("@opentelemetry/sdk-trace-base"),
      loadAtRun<OtlpExporterModule>(
        protocol === "http/json" ? "@opentelemetry/exporter-trace-otlp-http" : "@opentelemetry/exporter-trace-otlp-proto",
      ),
    ]);
  } catch (err) {
    const exporter = protocol === "http/json" ? "exporter-trace-otlp-http" : "exporter-trace-otlp-proto";
    throw new Error(
      `OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry packages are not installed (${(err as Error).message}); ` +
        `npm install @opentelemetry/api @opentelemetry/core @opentelemetry/resources @opentelemetry/sdk-trace-base @opentelemetry/${exporter}`,
    );
  }
  // OTEL_RESOURCE_ATTRIBUTES first, then this process's own; OTEL_SERVICE_NAME wins over both.
  const detected = resources.detectResources({ detectors: [resources.envDetector] });
  const resource = resources
    .resourceFromAttributes({ "service.name": options.service, ...options.resource, "process.pid": process.pid })
    .merge(detected)
    .merge(env.OTEL_SERVICE_NAME ? resources.resourceFromAttributes({ "service.name": env.OTEL_SERVICE_NAME }) : null);
  const provider = new base.BasicTracerProvider({
    resource,
    spanProcessors: [new base.BatchSpanProcessor(new exporterModule.OTLPTraceExporter())],
  });
  api.context.setGlobalContextManager(asyncContextManager(api));
  api.propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  api.trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer("spool");
  const kinds = { server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, internal: api.SpanKind.INTERNAL };

  /** The context a traceparent names (the root context when there is none, or it does not parse). */
  const contextOf = (traceparent: string | undefined): Api.Context => {
    const sc = traceparent ? core.parseTraceParent(traceparent) : null;
    return sc ? api.trace.setSpanContext(api.ROOT_CONTEXT, { ...sc, isRemote: true }) : api.ROOT_CONTEXT;
  };
  const wrap = (span: Api.Span): StartedSpan => ({
    traceparent: traceparentOf(span.spanContext()),
    set: (attributes) => span.setAttributes(attributes),
    fail: (message) => span.setStatus({ code: api.SpanStatusCode.ERROR, message }),
    end: () => span.end(),
  });

  return {
    start: (name, parent, attributes, kind) =>
      wrap(tracer.startSpan(name, { kind: kinds[kind ?? "internal"], attributes }, contextOf(parent))),
    record(name, parent, start, end, attributes, error) {
      const span = tracer.startSpan(name, { attributes, startTime: start }, contextOf(parent));
      if (error !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
      span.end(Math.max(start, end));
    },
    run: (name, parent, attributes, fn) =>
      tracer.startActiveSpan(name, { attributes }, contextOf(parent), async (span) => {
        try {
          return await fn(wrap(span));
        } finally {
          span.end();
        }
      }),
    child: (name, fn) =>
      tracer.startActiveSpan(name, async (span) => {
        try {
          return await fn();
        } catch (err) {
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: String((err as Error)?.message ?? err) });
          throw err;
        } finally {
          span.end();
        }
      }),
    active() {
      const sc = api.trace.getSpan(api.context.active())?.spanContext();
      return sc && api.trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : undefined;
    },
    shutdown: () => provider.shutdown(),
  };
}
