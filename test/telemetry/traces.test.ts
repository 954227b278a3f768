import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess } from "../helpers/spawned.ts";
import { until } from "../helpers/until.ts";
import { MemoryLog } from "../../runtime/log.ts";
import { startTracing } from "../../runtime/telemetry/tracing.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");
const TRACED = resolve(import.meta.dir, "../fixtures/traced-fixture.ts");
const OFF = resolve(import.meta.dir, "../fixtures/traces-off-fixture.ts");
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

interface Export {
  contentType: string;
  body: Uint8Array;
}

/** An OTLP/HTTP receiver on a free port: keeps every POST /v1/traces. */
function otlpReceiver() {
  const exports: Export[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/traces") return new Response("not found", { status: 404 });
      exports.push({ contentType: req.headers.get("content-type") ?? "", body: new Uint8Array(await req.arrayBuffer()) });
      return new Response(null, { status: 200 });
    },
  });
  return { exports, url: `http://127.0.0.1:${server.port}`, [Symbol.dispose]: () => server.stop(true) };
}

/** Runs one job of the traced handler on a real `spool serve` (which starts its worker) with `env`, under the client's traceparent. */
async function runTracedJob(env: Record<string, string>, body: (serve: ReturnType<typeof spawnProcess>) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "spool-traces-"));
  try {
    const config = join(dir, "spool.toml");
    writeFileSync(config, `[server]\nhost = "127.0.0.1"\n\n[endpoints.traced]\nhandler = "${TRACED}"\nworkersMax = 1\n`);
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
    await using serve = spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", join(dir, "data"), "--config", config], {
      env: { ...clean, ...env },
    });
    const [, url] = await serve.waitFor(/Spool listening on (http:\/\/\S+)/);
    const key = /spool_[A-Za-z0-9_-]+/.exec(serve.lines.join("\n"))![0];
    const res = await fetch(`${url}/v2/traced/runsync?wait=60000`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01` },
      body: JSON.stringify({ input: {} }),
    });
    expect(((await res.json()) as { status: string }).status).toBe("COMPLETED");
    await body(serve);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Span {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  service: string;
  workerId?: string;
  pid?: number;
}

/** The spans of OTLP/JSON exports, each with its resource's service.name, spool.worker.id and process.pid. */
function spansOf(exports: Export[]): Span[] {
  const spans: Span[] = [];
  for (const e of exports) {
    const doc = JSON.parse(new TextDecoder().decode(e.body));
    for (const rs of doc.resourceSpans) {
      const attr = (k: string) => rs.resource.attributes.find((a: { key: string }) => a.key === k)?.value;
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          spans.push({
            name: s.name,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            service: attr("service.name")?.stringValue,
            workerId: attr("spool.worker.id")?.stringValue,
            pid: Number(attr("process.pid")?.intValue),
          });
        }
      }
    }
  }
  return spans;
}

const WANTED = ["spool.submit", "spool.queue_wait", "spool.take", "spool.handler", "spool.test.inner", "spool.result"];

test("with OTEL_EXPORTER_OTLP_ENDPOINT and http/json, the server's and the worker's spans of a job reach the collector under the client's trace, parented to its submit", async () => {
  using receiver = otlpReceiver();
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "20" };
  await runTracedJob(env, async (serve) => {
    const spans = await until(
      () => {
        const all = spansOf(receiver.exports).filter((s) => s.traceId === TRACE_ID);
        return WANTED.every((n) => all.some((s) => s.name === n)) && all;
      },
      "every span of the job at the collector",
      60_000,
    );
    expect(receiver.exports.every((e) => e.contentType.startsWith("application/json"))).toBe(true);
    const named = (n: string) => spans.find((s) => s.name === n)!;
    const submit = named("spool.submit");
    expect(submit.parentSpanId).toBe(CLIENT_SPAN);
    for (const n of ["spool.queue_wait", "spool.take", "spool.handler", "spool.result"])
      expect([n, named(n).parentSpanId]).toEqual([n, submit.spanId]);
    expect(named("spool.test.inner").parentSpanId).toBe(named("spool.handler").spanId);
    // Each process's spans carry its own resource.
    const handler = named("spool.handler");
    expect([submit.service, handler.service]).toEqual(["spool-server", "spool-worker"]);
    expect(handler.workerId).toMatch(/^traced-/);
    expect(submit.workerId).toBeUndefined();
    expect(handler.pid).not.toBe(submit.pid);
    // The handler's log line inside its span names the span.
    const line = serve.lines.find((l) => l.includes("inside the inner span"));
    expect(line && JSON.parse(line.slice(line.indexOf("{")))).toMatchObject({
      trace_id: TRACE_ID,
      span_id: named("spool.test.inner").spanId,
    });
  });
}, 90_000);

test("with http/protobuf (the default protocol), the server and the worker each send protobuf bodies carrying the client's trace id", async () => {
  using receiver = otlpReceiver();
  const env = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`, OTEL_BSP_SCHEDULE_DELAY: "20" };
  const traceBytes = Buffer.from(TRACE_ID, "hex");
  const has = (body: Uint8Array, part: Uint8Array) => Buffer.from(body).indexOf(part) >= 0;
  await runTracedJob(env, async () => {
    const from = (service: string) => receiver.exports.find((e) => has(e.body, Buffer.from(service)) && has(e.body, traceBytes));
    await until(() => from("spool-server") && from("spool-worker"), "protobuf exports of the server and the worker", 60_000);
    expect(receiver.exports.map((e) => e.contentType)).toEqual(receiver.exports.map(() => "application/x-protobuf"));
    expect(has(from("spool-worker")!.body, Buffer.from("spool.worker.id"))).toBe(true);
  });
}, 90_000);

test("without an OTLP endpoint none of the OpenTelemetry SDK is loaded, and a take answers no traceparent", async () => {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  await using run = spawnProcess([process.execPath, OFF], { env: clean });
  const [line] = await run.waitFor(/^\{"taken".*/);
  const { taken, loaded } = JSON.parse(line);
  expect([Object.keys(taken).includes("traceparent"), loaded]).toEqual([false, []]);
}, 60_000);

test("a protocol Spool does not speak leaves traces off with one warning", async () => {
  const log = new MemoryLog();
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" };
  expect(await startTracing({ service: "spool-server", log, env })).toBeUndefined();
  expect(log.lines).toEqual([
    JSON.stringify({
      level: "warn",
      msg: "traces are off: OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: use http/protobuf or http/json",
    }),
  ]);
});
