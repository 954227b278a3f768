import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { silentLog } from "../../runtime/log.ts";
import { JobEvents } from "../../runtime/server/jobs/job-events.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { EndpointStatsRecorder } from "../../runtime/server/metrics/endpoint-stats.ts";
import { ServerMetrics } from "../../runtime/server/metrics/server-metrics.ts";
import { createApp } from "../../runtime/server/app.ts";
import { LocalFileStore } from "../../runtime/server/files/file-store.ts";
import { SqliteStore } from "../../runtime/server/store/sqlite/sqlite-store.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

/**
 * The requests of a job's path (run, runsync, status, job-take, job-take-batch, job-done) are
 * matched by their own router and the rest by Hono's, behind the same steps. Each case below is
 * asked as written and with a letter of its path percent-escaped (which Hono's router routes),
 * and must get its expected answer both ways.
 */
const escaped = (path: string) => `/v2/%${path.charCodeAt(4).toString(16).toUpperCase()}${path.slice(5)}`;

/** Status, body and the headers a client acts on. */
async function answer(res: Response) {
  return {
    status: res.status,
    body: await res.text(),
    type: res.headers.get("content-type"),
    retryAfter: res.headers.get("retry-after"),
  };
}

async function bothWays(srv: TestServer, method: string, path: string, body?: string, auth?: string | null) {
  const hot = await answer(await srv.call(method, path, body, { auth }));
  const viaHono = await answer(await srv.call(method, escaped(path), body, { auth }));
  return { hot, viaHono };
}

describe("the job routes", () => {
  test("refusals: keys, scopes, endpoints, bodies, parameters and rate limits", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({
      clock,
      endpoints: { echo: {}, limited: { rateLimits: { run: { requests: 4, concurrent: 1 } } }, other: {} },
    });
    const worker = (await createKey(srv.store, "w", clock.now(), { scope: "worker" })).key;
    const client = (await createKey(srv.store, "c", clock.now(), { scope: "client" })).key;
    const readOnly = (await createKey(srv.store, "r", clock.now(), { scope: "read-only" })).key;
    const elsewhere = (await createKey(srv.store, "o", clock.now(), { endpoints: ["other"] })).key;
    const job = JSON.stringify({ input: { n: 1 } });
    const cases: [string, string, string | undefined, string | null | undefined, number][] = [
      ["POST", "/v2/echo/run", job, null, 401],
      ["POST", "/v2/echo/run", job, "Bearer spool_wrong", 401],
      ["POST", "/v2/echo/run", job, `Bearer ${worker}`, 401],
      ["POST", "/v2/echo/run", job, `Bearer ${readOnly}`, 401],
      ["POST", "/v2/echo/run", job, `Bearer ${elsewhere}`, 401],
      ["POST", "/v2/nope/run", job, `Bearer ${elsewhere}`, 401], // a limited key cannot tell which endpoints exist
      ["POST", "/v2/echo/run", "{not json", undefined, 400],
      ["POST", "/v2/echo/run", "", undefined, 400],
      ["POST", "/v2/echo/run", JSON.stringify({ input: 1, policy: { ttl: 5 } }), undefined, 400],
      ["POST", "/v2/echo/run", " ".repeat(10 * 1024 * 1024 + 1), undefined, 413],
      ["POST", "/v2/echo/runsync", "[]", undefined, 400],
      ["POST", "/v2/echo/runsync?wait=5", job, undefined, 400],
      ["POST", "/v2/echo/runsync", job, `Bearer ${worker}`, 401],
      ["GET", "/v2/echo/status/nope", undefined, undefined, 404],
      ["GET", "/v2/echo/status/nope?ttl=5", undefined, undefined, 400],
      ["GET", "/v2/echo/status/nope?ttl=60000", undefined, `Bearer ${readOnly}`, 401],
      ["GET", "/v2/echo/status/nope", undefined, `Bearer ${worker}`, 401],
      ["GET", "/v2/echo/job-take/w1", undefined, `Bearer ${client}`, 401],
      ["GET", "/v2/echo/job-take-batch/w1?batch_size=0", undefined, undefined, 400],
      ["GET", "/v2/echo/job-take-batch/w1?batch_size=65", undefined, undefined, 400],
      ["GET", "/v2/echo/job-take/w1", undefined, undefined, 204],
      ["POST", "/v2/echo/job-done/w1/nope", "{", `Bearer ${worker}`, 400],
      ["POST", "/v2/echo/job-done/w1/nope", JSON.stringify({ status: 5 }), undefined, 400],
      ["POST", "/v2/echo/job-done/w1/nope", JSON.stringify({ output: 1 }), undefined, 404], // no such job on the endpoint
    ];
    for (const [method, path, body, auth, status] of cases) {
      const { hot, viaHono } = await bothWays(srv, method, path, body, auth);
      const what = { method, path, body: body?.slice(0, 40), auth };
      expect({ ...what, ...hot }).toEqual({ ...what, ...viaHono });
      expect({ ...what, status: hot.status }).toEqual({ ...what, status });
    }
    const unknown = await bothWays(srv, "POST", "/v2/nope/run", job);
    expect(unknown.hot).toEqual(unknown.viaHono);
    expect(unknown.hot.status).toBe(404);

    // A queued job's status (with its queuePosition) reads the same both ways.
    const [, queued] = await srv.json("POST", "/v2/echo/run", { input: { q: 1 } });
    const status = await bothWays(srv, "GET", `/v2/echo/status/${queued.id}`);
    expect(status.hot).toEqual(status.viaHono);
    expect(JSON.parse(status.hot.body)).toMatchObject({ id: queued.id, status: "IN_QUEUE", queuePosition: 0 });

    // 4 runs a window, one at a time: two each way are accepted (each gave its slot back), then
    // both ways are refused with the same 429.
    const runs = await bothWays(srv, "POST", "/v2/limited/run", job);
    expect([runs.hot.status, runs.viaHono.status]).toEqual([200, 200]);
    expect(JSON.parse(runs.hot.body)).toEqual({ id: expect.any(String), status: "IN_QUEUE" });
    expect(Object.keys(JSON.parse(runs.viaHono.body))).toEqual(["id", "status"]);
    expect((await bothWays(srv, "POST", "/v2/limited/run", job)).hot.status).toBe(200);
    const refused = await bothWays(srv, "POST", "/v2/limited/run", job);
    expect(refused.hot).toEqual(refused.viaHono);
    expect(refused.hot.status).toBe(429);
    expect(refused.hot.retryAfter).not.toBeNull();
  });

  test("jobs through runpod-python's forms (a bare & in the path, runsync) are taken, done and counted under their route labels", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { x: 1 } });
    const take = await srv.call("GET", "/v2/echo/job-take/w1&job_in_progress=0");
    expect(take.status).toBe(200);
    expect(take.headers.get("content-type")).toBe("application/json");
    const taken = await take.json();
    expect(taken).toMatchObject({ id, input: { x: 1 }, policy: { ttl: 86_400_000 } });
    const done = await srv.call("POST", `/v2/echo/job-done/w1&job_in_progress=1/${id}?gpu=x&isStream=false`, { output: { ok: true } });
    expect([done.status, await done.json()]).toEqual([200, {}]);
    const [, status] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(status).toMatchObject({ id, status: "COMPLETED", output: { ok: true }, workerId: "w1" });
    const batch = await srv.call("GET", "/v2/echo/job-take-batch/w1?batch_size=3");
    expect(batch.status).toBe(204);

    const metrics = await (await srv.call("GET", "/metrics")).text();
    for (const line of [
      'spool_http_requests_total{method="POST",route="/v2/:endpoint/run",status="200"} 1',
      'spool_http_requests_total{method="GET",route="/v2/:endpoint/job-take/:worker",status="200"} 1',
      'spool_http_requests_total{method="POST",route="/v2/:endpoint/job-done/:worker/:job",status="200"} 1',
      'spool_http_requests_total{method="GET",route="/v2/:endpoint/job-take-batch/:worker",status="204"} 1',
      'spool_http_requests_total{method="GET",route="/v2/:endpoint/status/:id",status="200"} 1',
    ]) {
      expect(metrics).toContain(`${line}\n`);
    }

    // runsync answers once a worker's result arrives.
    const sync = srv.json("POST", "/v2/echo/runsync", { input: { y: 2 } });
    let syncJob: { id: string } | undefined = undefined as { id: string } | undefined;
    await until(async () => {
      const res = await srv.call("GET", "/v2/echo/job-take/w2");
      if (res.status === 200) syncJob = (await res.json()) as { id: string };
      return syncJob !== undefined;
    }, "the runsync job to be taken");
    await srv.call("POST", `/v2/echo/job-done/w2/${syncJob!.id}`, { output: "ok" });
    expect(await sync).toEqual([200, expect.objectContaining({ id: syncJob!.id, status: "COMPLETED", output: "ok", workerId: "w2" })]);
  });

  test("HEAD, server-sent events, a body of undeclared length and a path that is not theirs", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { x: 1 } });
    const head = await srv.call("HEAD", `/v2/echo/status/${id}`);
    expect([head.status, await head.text()]).toEqual([200, ""]);
    // A status asked as events goes on to the SSE route, which streams the job's state.
    const events = await srv.call("GET", `/v2/echo/status/${id}`, undefined, { headers: { accept: "text/event-stream" } });
    expect(events.headers.get("content-type")).toStartWith("text/event-stream");
    const reader = events.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain(id);
    await reader.cancel();
    // A streamed body is limited as it comes in, after the key was checked.
    const chunked = (size: number, auth: boolean) =>
      fetch(`${srv.url}/v2/echo/run`, {
        method: "POST",
        headers: auth ? { authorization: `Bearer ${srv.key}` } : {},
        // A stream of 1 MiB parts, sent chunked: no content-length.
        body: new ReadableStream({
          start(controller) {
            const bytes = new TextEncoder().encode(JSON.stringify({ input: { s: "x".repeat(size) } }));
            for (let i = 0; i < bytes.length; i += 1 << 20) controller.enqueue(bytes.subarray(i, i + (1 << 20)));
            controller.close();
          },
        }),
      });
    const small = await chunked(10, true);
    expect(small.status).toBe(200);
    expect((await chunked(10 * 1024 * 1024 + 1, true)).status).toBe(413);
    expect((await chunked(10 * 1024 * 1024 + 1, false)).status).toBe(401);
    // A key limited to endpoints gets the same 401 on any other, existing or not.
    const limited = (await createKey(srv.store, "limited", Date.now(), { endpoints: ["echo"] })).key;
    for (const path of ["/v2/slow/health", "/v2/nope/health", "/v2/nope/status/x"]) {
      expect([path, (await srv.call("GET", path, undefined, { auth: `Bearer ${limited}` })).status]).toEqual([path, 401]);
    }
    // Methods and shapes that are not a job route's.
    expect((await srv.call("GET", "/v2/echo/run")).status).toBe(404);
    expect((await srv.call("POST", "/v2/echo/run/x", "{}")).status).toBe(404);
    expect((await srv.call("GET", "/v2/echo/job-take/w1/extra")).status).toBe(404);
  });

  test("a step given to the app sees every request, the six job routes' included", async () => {
    const store = SqliteStore.open(":memory:", { retention: { syncMs: 60_000, asyncMs: 60_000 } });
    const clock = new ManualClock();
    const jobEvents = new JobEvents((err) => {
      throw err;
    });
    const stats = new EndpointStatsRecorder(jobEvents, clock);
    // Empty takes answer at once: the manual clock never ends a long-poll.
    const config = parseConfig({ server: { takeWaitMs: 0 }, endpoints: { echo: {} } });
    const deps = { store, config, clock, log: silentLog, jobEvents, stats };
    const metrics = new ServerMetrics(deps);
    const dataDir = mkdtempSync(join(tmpdir(), "spool-chain-"));
    const localFiles = new LocalFileStore(dataDir, 60_000);
    const seen: string[] = [];
    const tagged: string[] = [];
    const app = createApp({
      ...deps,
      metrics,
      files: localFiles,
      localFiles,
      middleware: [
        async (call, next) => {
          const res = await next(call);
          seen.push(`${call.req.method} ${new URL(call.req.url).pathname} ${res.status}`);
          return res;
        },
      ],
    });
    // One added later runs after the first, and what it sets on the answer reaches the client.
    app.use(async (call, next) => {
      tagged.push(call.route);
      const res = await next(call);
      res.headers.set("x-seen", "1");
      return res;
    });
    try {
      const { key } = await createKey(store, "k", clock.now());
      const call = (method: string, path: string, body?: unknown) =>
        app.fetch(
          new Request(`http://127.0.0.1${path}`, {
            method,
            headers: { authorization: `Bearer ${key}` },
            body: body === undefined ? undefined : JSON.stringify(body),
          }),
        );
      const run = await call("POST", "/v2/echo/run", { input: { n: 1 } });
      expect(run.headers.get("x-seen")).toBe("1");
      const { id } = (await run.json()) as { id: string };
      expect((await call("GET", "/v2/echo/job-take/w1")).status).toBe(200);
      expect((await call("POST", `/v2/echo/job-done/w1/${id}`, { output: 2 })).status).toBe(200);
      expect((await call("GET", `/v2/echo/status/${id}`)).status).toBe(200);
      expect((await call("GET", "/v2/echo/job-take-batch/w1?batch_size=2")).status).toBe(204);
      const sync = call("POST", "/v2/echo/runsync?wait=1000", { input: { n: 3 } });
      let syncId = "";
      await until(async () => {
        const res = await call("GET", "/v2/echo/job-take/w2");
        if (res.status === 200) syncId = ((await res.json()) as { id: string }).id;
        return syncId !== "";
      }, "the runsync job to be taken");
      expect((await call("POST", `/v2/echo/job-done/w2/${syncId}`, { output: 4 })).status).toBe(200);
      expect((await sync).status).toBe(200);
      expect(seen).toEqual([
        "POST /v2/echo/run 200",
        "GET /v2/echo/job-take/w1 200",
        `POST /v2/echo/job-done/w1/${id} 200`,
        `GET /v2/echo/status/${id} 200`,
        "GET /v2/echo/job-take-batch/w1 204",
        ...seen.filter((s) => s === "GET /v2/echo/job-take/w2 204"),
        "GET /v2/echo/job-take/w2 200",
        `POST /v2/echo/job-done/w2/${syncId} 200`,
        "POST /v2/echo/runsync 200",
      ]);
      // And the routes Hono answers, a refusal, an unknown route, and a host the server does not answer for.
      expect((await call("GET", "/v2/echo/health")).status).toBe(200);
      expect(seen.at(-1)).toBe("GET /v2/echo/health 200");
      expect((await call("GET", "/v2/nope/health")).status).toBe(404);
      expect(seen.at(-1)).toBe("GET /v2/nope/health 404");
      expect((await call("GET", "/no/such/route")).status).toBe(404);
      expect(seen.at(-1)).toBe("GET /no/such/route 404");
      const foreign = await app.fetch(new Request("http://evil.example/v2/echo/health"));
      expect([foreign.status, foreign.headers.get("x-seen")]).toEqual([400, "1"]);
      expect(seen.at(-1)).toBe("GET /v2/echo/health 400");
      // The later step saw each request before it was routed: no route yet.
      expect(new Set(tagged)).toEqual(new Set(["unmatched"]));
      expect(tagged.length).toBe(seen.length);
    } finally {
      metrics.close();
      stats.close();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
