import { describe, expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

const root = resolve(import.meta.dir, "../..");
const endpoints = {
  echo: { rateLimits: { requests: { requests: 1000 } } },
  slow: { handler: join(root, "handlers/examples/slow.ts"), workersMax: 0 },
};

test("the server's root leads a browser to the dashboard", async () => {
  await using srv = await startTestServer();
  const res = await fetch(`${srv.url}/`, { redirect: "manual" });
  expect([res.status, res.headers.get("location")]).toEqual([302, "/dashboard"]);
});

describe("the dashboard's JSON", () => {
  test("endpoints a key may see, with settings and input schema; worker and unknown keys refused", async () => {
    await using srv = await startTestServer({ endpoints });
    const [status, body] = await srv.json("GET", "/dashboard/api/endpoints");
    expect(status).toBe(200);
    expect(body.key).toEqual({ name: "test", scope: "full", endpoints: null });
    expect(body.endpoints.map((e: any) => e.id)).toEqual(["echo", "slow"]);
    expect(body.endpoints[1]).toEqual({
      id: "slow",
      handler: "slow.ts",
      workersMin: 0,
      workersMax: 0,
      idleTimeout: 5,
      executionTimeout: 600000,
      scalerType: "QUEUE_DELAY",
      scalerValue: 4,
      startFailureLimit: 5,
      startFailureWindowMs: 300000,
      onStartFailure: "fail",
      inputSchema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { ms: { type: "integer", minimum: 0, maximum: 3600000 } },
        required: ["ms"],
      },
    });
    expect(body.endpoints[0].inputSchema).toBeNull(); // no handler the server can read

    const now = srv.clock.now();
    const echoOnly = (await createKey(srv.store, "e", now, { scope: "read-only", endpoints: ["echo"] })).key;
    const [, limited] = await srv.json("GET", "/dashboard/api/endpoints", undefined, { auth: echoOnly });
    expect(limited.endpoints.map((e: any) => e.id)).toEqual(["echo"]);
    expect(limited.key).toEqual({ name: "e", scope: "read-only", endpoints: ["echo"] });
    expect(await srv.json("GET", "/dashboard/api/endpoints/slow/jobs/x", undefined, { auth: echoOnly })).toEqual([
      401,
      { error: "this API key is restricted to endpoints echo" },
    ]);

    const worker = (await createKey(srv.store, "w", now, { scope: "worker" })).key;
    expect((await srv.json("GET", "/dashboard/api/endpoints", undefined, { auth: worker }))[0]).toBe(401);
    expect(await srv.json("GET", "/dashboard/api/endpoints", undefined, { auth: "Bearer nope" })).toEqual([
      401,
      { error: "invalid or revoked API key" },
    ]);
    expect((await srv.json("GET", "/dashboard/api/endpoints", undefined, { auth: null }))[0]).toBe(401);
    expect((await srv.json("GET", "/dashboard/api/endpoints/nope/jobs/x"))[0]).toBe(404);
  });

  test("a job's detail: input without s3Config, chunks, times; another client's input is not shown", async () => {
    await using srv = await startTestServer({ endpoints });
    const s3Config = { accessId: "AKIA", accessSecret: "secret-value", bucketName: "b", endpointUrl: "http://127.0.0.1:1" };
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { prompt: "hi", s3Config }, s3Config });
    const worker = protocolWorker(srv, "echo", "w1");
    await worker.take();
    await worker.stream(id, "a");
    await worker.done(id, { output: { ok: true } });
    const [status, job] = await srv.json("GET", `/dashboard/api/endpoints/echo/jobs/${id}`);
    expect(status).toBe(200);
    expect(JSON.stringify(job)).not.toContain("secret-value");
    expect(job).toMatchObject({
      id,
      status: "COMPLETED",
      input: { prompt: "hi" },
      output: { ok: true },
      workerId: "w1",
      stream: [{ output: "a" }],
      streamChunks: 1,
      retries: 0,
      losses: 0,
      sync: false,
    });
    expect(
      Object.keys(job)
        .filter((k) => k.endsWith("At"))
        .sort(),
    ).toEqual(["completedAt", "createdAt", "expiresAt", "queuedAt", "startedAt"]);

    const other = (await createKey(srv.store, "other", srv.clock.now(), { scope: "client" })).key;
    const [, seenByOther] = await srv.json("GET", `/dashboard/api/endpoints/echo/jobs/${id}`, undefined, { auth: other });
    expect(seenByOther.input).toBeUndefined();
    expect(seenByOther.inputHidden).toContain("another key");
    expect((await srv.json("GET", "/dashboard/api/endpoints/echo/jobs/nope"))[0]).toBe(404);

    // The endpoint's recent figures count the job that ended.
    const [, stats] = await srv.json("GET", "/dashboard/api/endpoints/echo/stats");
    expect(stats).toMatchObject({
      endpointId: "echo",
      jobsPerMinute: 1,
      delayMs: { p50: expect.any(Number) },
      executionMs: { p50: expect.any(Number) },
    });
    expect(stats.series.reduce((n: number, m: any) => n + m.ended, 0)).toBe(1);
    expect((await srv.json("GET", "/dashboard/api/endpoints/echo/stats", undefined, { auth: other }))[0]).toBe(200);
  });

  test("/requests filters by status", async () => {
    await using srv = await startTestServer({ endpoints });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    await srv.json("POST", `/v2/echo/cancel/${ids[1]}`);
    const [, cancelled] = await srv.json("GET", "/v2/echo/requests?status=CANCELLED");
    expect(cancelled.requests.map((r: any) => r.id)).toEqual([ids[1]]);
    const [, queued] = await srv.json("GET", "/v2/echo/requests?status=IN_QUEUE&limit=1");
    expect(queued.requests.map((r: any) => r.id)).toEqual([ids[2]]);
    const [, older] = await srv.json("GET", `/v2/echo/requests?status=IN_QUEUE&limit=1&cursor=${queued.nextCursor}`);
    expect(older.requests.map((r: any) => r.id)).toEqual([ids[0]]);
    expect(await srv.json("GET", "/v2/echo/requests?status=DONE")).toEqual([
      400,
      { error: "query parameter status must be one of IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED, TIMED_OUT" },
    ]);
  });

  test("the page is served at /dashboard with its bundled script and styles", async () => {
    await using srv = await startTestServer({ endpoints });
    const res = await fetch(`${srv.url}/dashboard`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("<title>Spool dashboard</title>");
    const assets = [...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
    expect(assets.length).toBe(2);
    for (const asset of assets) expect((await fetch(new URL(asset, `${srv.url}/dashboard`))).status).toBe(200);
  });
});
