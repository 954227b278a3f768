import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { dereference, validate } from "@readme/openapi-parser";
import Ajv2020 from "ajv/dist/2020";
import { z } from "zod";
import streamHandler from "../../../handlers/examples/stream.ts";
import { systemClock } from "../../../runtime/clock.ts";
import { parseConfig } from "../../../runtime/config/config.ts";
import { silentLog } from "../../../runtime/log.ts";
import { createApp } from "../../../runtime/server/app.ts";
import { LocalFileStore } from "../../../runtime/server/files/file-store.ts";
import { JobEvents } from "../../../runtime/server/jobs/job-events.ts";
import { EndpointStatsRecorder } from "../../../runtime/server/metrics/endpoint-stats.ts";
import { SqliteStore } from "../../../runtime/server/store/sqlite/sqlite-store.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer } from "../../helpers/test-server.ts";

const WORDS = resolve(import.meta.dir, "../../../handlers/examples/stream.ts");

type Schema = Record<string, any>;
type Operation = { operationId: string; parameters?: Schema[]; requestBody?: Schema; responses: Record<string, Schema> };

/** A server with a handler whose input schema it can read (words) and one it cannot (echo). */
const docServer = () =>
  startTestServer({
    endpoints: {
      echo: { rateLimits: { requests: { requests: 1_000_000 } } },
      // workersMax 0: the scaler starts no process; the test speaks the worker protocol itself.
      words: { handler: WORDS, workersMax: 0 },
    },
  });

/** The smallest value a schema accepts, built from the document alone. */
function sample(s: Schema): unknown {
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  if (s.allOf) return Object.assign({}, ...s.allOf.map(sample));
  if (s.anyOf || s.oneOf) return sample((s.anyOf ?? s.oneOf)[0]);
  switch (s.type) {
    case "object":
      return Object.fromEntries((s.required ?? []).map((k: string) => [k, sample(s.properties?.[k] ?? {})]));
    case "string":
      return "text";
    case "integer":
    case "number":
      return s.minimum ?? 1;
    case "boolean":
      return false;
    case "array":
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items ?? {}));
    default:
      return {};
  }
}

describe("OpenAPI document", () => {
  test("is valid OpenAPI 3.1 and carries each endpoint's input schema from its handler", async () => {
    await using srv = await docServer();
    const res = await srv.call("GET", "/openapi.json", undefined, { auth: null });
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Schema;
    const result = await validate(structuredClone(doc) as never);
    expect(result).toMatchObject({ valid: true, specification: "OpenAPI" });
    expect(doc.openapi).toBe("3.1.0");

    // Both auth header forms, on every keyed route.
    expect(doc.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
      bareKey: expect.objectContaining({ type: "apiKey", in: "header", name: "Authorization" }),
    });
    expect(doc.paths["/v2/{endpoint_id}/run"].post.security).toEqual([{ bearer: [] }, { bareKey: [] }]);

    // The words handler's own schema, the same that /run validates with; echo's is unknown.
    const { $schema: _s, ...wordsInput } = z.toJSONSchema(streamHandler.input, { io: "input", unrepresentable: "any" });
    expect(doc.components.schemas["words.input"]).toEqual(wordsInput);
    expect(doc.components.schemas["echo.input"]).toMatchObject({ type: "object", additionalProperties: true });
    expect(doc.paths["/v2/words/run"].post.requestBody.content["application/json"].schema.allOf[1].properties.input).toEqual({
      $ref: "#/components/schemas/words.input",
    });
    // queuePosition is documented as an optional addition to RunPod's job response.
    expect(doc.components.schemas.JobResponse.properties.queuePosition).toMatchObject({ type: "integer", minimum: 0 });
    expect(doc.components.schemas.JobResponse.required).toEqual(["id", "status"]);
    const ids = Object.values(doc.paths as Record<string, Record<string, Operation>>).flatMap((p) =>
      Object.values(p).map((o) => o.operationId),
    );
    expect(ids).toEqual(
      expect.arrayContaining(["run", "runsync", "status", "statusSync", "stream", "cancel", "retry", "purgeQueue", "health", "requests"]),
    );
    expect(ids).toEqual(expect.arrayContaining(["jobTake", "jobTakeBatch", "jobDone", "jobStream", "ping", "jobStop", "jobFileUpload"]));
    expect(ids).toEqual(
      expect.arrayContaining(["openaiChatCompletions", "openaiCompletions", "openaiModels", "compatChatCompletions", "metrics"]),
    );
    expect(ids).toEqual(expect.arrayContaining(["run_words", "runsync_words", "run_echo", "runsync_echo"]));
  });

  test("every route of the app is in the document with its method (the dashboard's own JSON and the docs themselves aside)", async () => {
    await using srv = await docServer();
    const doc = (await srv.json("GET", "/openapi.json", undefined, { auth: null }))[1] as Schema;
    const documented = new Set(
      Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
        Object.keys(item).map((m) => `${m.toUpperCase()} ${path.replace(/\{[^}]+\}/g, "{}")}`),
      ),
    );
    const store = SqliteStore.open(":memory:", { retention: { syncMs: 60_000, asyncMs: 60_000 } });
    const files = new LocalFileStore(srv.dataDir, 60_000);
    const jobEvents = new JobEvents();
    const app = createApp({
      store,
      config: parseConfig({}),
      clock: systemClock,
      log: silentLog,
      files,
      localFiles: files,
      jobEvents,
      stats: new EndpointStatsRecorder(jobEvents, systemClock),
    });
    const routes = new Set(
      app.routes
        .filter((r) => r.method !== "ALL" && !/^\/(dashboard|docs|openapi\.json)/.test(r.path))
        .map((r) => `${r.method} ${r.path.replace(/:[^/]+/g, "{}")}`),
    );
    expect([...routes].filter((r) => !documented.has(r))).toEqual([]);
    expect(routes.size).toBeGreaterThan(20);
    await store.close();
  });

  test("a request built from the document for each route is answered as documented", async () => {
    await using srv = await docServer();
    const doc = (await dereference((await srv.json("GET", "/openapi.json", undefined, { auth: null }))[1])) as Schema;
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    const w = protocolWorker(srv, "echo", "w1");
    const run = async (ep = "echo") => (await srv.json("POST", `/v2/${ep}/run`, { input: {} }))[1].id as string;
    let fileUrl: URL | undefined;

    /** Answers jobs of `ep` as a worker would until the waiting request has its answer. */
    const answer = async (ep: string, output: unknown, answered: () => boolean) => {
      const worker = protocolWorker(srv, ep, `answerer-${ep}`); // a worker id belongs to one endpoint
      while (!answered()) {
        const job = await worker.take();
        if (job) await worker.done(job.id, { output });
        else await Bun.sleep(0);
      }
    };

    /** Per operation: the ids to use, and anything that must happen while it waits. */
    async function prepare(
      op: string,
    ): Promise<{ params?: Record<string, string>; body?: string; during?: (answered: () => boolean) => Promise<unknown> }> {
      switch (op) {
        case "status":
        case "statusSync":
        case "stream":
        case "logs": {
          const id = await run();
          await w.take();
          await w.done(id, { output: { ok: true } });
          return { params: { id } };
        }
        case "cancel":
          return { params: { id: await run() } };
        case "retry": {
          const id = await run();
          await w.take();
          await w.done(id, { error: "boom" });
          return { params: { id } };
        }
        case "jobTake":
        case "jobTakeBatch":
          await run();
          return {};
        case "jobDone":
        case "jobStream":
        case "jobLog":
        case "jobFileUpload": {
          const id = await run();
          await w.take();
          return { params: { job_id: id, name: "a.txt" }, ...(op === "jobFileUpload" ? { body: "hello" } : {}) };
        }
        case "jobStop": {
          const id = await run();
          await w.take();
          await srv.json("POST", `/v2/echo/cancel/${id}`);
          return {};
        }
        case "fileDownload":
          return {
            params: Object.fromEntries(
              fileUrl!.pathname
                .split("/")
                .slice(2)
                .map((v, i) => [["endpoint_id", "job_id", "name"][i]!, v]),
            ),
          };
        case "runsync":
        case "runsync_echo":
          return { during: (answered) => answer("echo", { done: 1 }, answered) };
        case "runsync_words":
          return { during: (answered) => answer("words", "a", answered) };
        default:
          if (op.includes("Completions") || op.includes("Models"))
            return { during: (answered) => answer("echo", { object: "list", data: [] }, answered) };
          return {};
      }
    }

    const checked: string[] = [];
    let n = 0;
    for (const [template, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, op] of Object.entries(item)) {
        const prep = await prepare(op.operationId);
        const values: Record<string, string> = { worker_id: "w1", ...prep.params };
        let path = template;
        const query = new URLSearchParams();
        for (const p of op.parameters ?? []) {
          const v = values[p.name] ?? String(sample(p.schema));
          if (p.in === "path") path = path.replace(`{${p.name}}`, encodeURIComponent(v));
          else if (p.in === "query" && (p.required || p.name in values)) query.set(p.name, v);
        }
        if (op.operationId === "fileDownload") fileUrl!.searchParams.forEach((v, k) => query.set(k, v));
        const media = op.requestBody ? Object.keys(op.requestBody.content)[0]! : undefined;
        const body =
          prep.body ?? (media === "application/json" ? JSON.stringify(sample(op.requestBody!.content[media].schema)) : undefined);
        // Alternate the two documented auth forms.
        const auth = op.operationId === "fileDownload" ? null : n++ % 2 ? srv.key : `Bearer ${srv.key}`;
        let answered = false;
        const request = srv.call(method.toUpperCase(), `${path}${query.size ? `?${query}` : ""}`, body, {
          auth,
          headers: media ? { "content-type": media } : {},
        });
        void request.finally(() => (answered = true));
        const [res] = await Promise.all([request, prep.during?.(() => answered)]);
        const documented = op.responses[String(res.status)];
        const text = await res.text();
        expect({ op: op.operationId, status: res.status, documented: documented !== undefined }).toEqual({
          op: op.operationId,
          status: res.status,
          documented: true,
        });
        expect({ op: op.operationId, status: res.status }).toEqual({ op: op.operationId, status: res.status < 300 ? res.status : -1 });
        const type = res.headers.get("content-type") ?? "";
        const content = documented!.content as Schema | undefined;
        if (res.status !== 204) {
          const media = Object.keys(content ?? {}).find((m) => type.startsWith(m));
          expect({ op: op.operationId, type, documented: media !== undefined }).toEqual({ op: op.operationId, type, documented: true });
          if (media === "application/json") {
            const valid = ajv.validate(content![media].schema, JSON.parse(text));
            expect({ op: op.operationId, errors: valid ? null : ajv.errors }).toEqual({ op: op.operationId, errors: null });
          }
        }
        if (op.operationId === "jobFileUpload") fileUrl = new URL(JSON.parse(text).url);
        checked.push(`${method.toUpperCase()} ${template} ${res.status}`);
      }
    }
    expect(checked.length).toBe(Object.values(doc.paths).reduce((s: number, p) => s + Object.keys(p as object).length, 0));
    expect(checked).toContain("POST /v2/words/run 200");
    expect(checked).toContain("GET /v2/{endpoint_id}/job-take/{worker_id} 200");

    // And a documented error: words' own schema refuses input without `text`, as a 400 {"error"}.
    const bad = await srv.json("POST", "/v2/words/run", { input: {} });
    expect(bad[0]).toBe(400);
    expect(ajv.validate(doc.paths["/v2/words/run"].post.responses["400"].content["application/json"].schema, bad[1])).toBe(true);
  });
});
