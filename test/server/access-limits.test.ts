import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { parseConfig, type ConfigInput } from "../../runtime/config/config.ts";
import { MemoryLog } from "../../runtime/log.ts";
import { RATE_LIMITS } from "../../runtime/protocol/limits.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { isPrivateAddress } from "../../runtime/server/jobs/webhook-address.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { parked, startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

// Access control (key scopes and endpoint restrictions), the per-operation rate limits, the 429
// backpressure rule, webhookBlockPrivate, and that secrets stay out of logs and responses.
// Time only moves through a ManualClock; nothing here sleeps on the wall clock to pass time.

const NO_JOBS = { completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 };
const NO_WORKERS = { idle: 0, running: 0, initializing: 0, unhealthy: 0 };
const WINDOW = 10_000;

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
}

/** One request; `auth` is the whole Authorization header (null: none), the test key by default. */
async function send(srv: TestServer, method: string, path: string, body?: unknown, auth?: string | null): Promise<Answer> {
  const res = await srv.call(method, path, body, { auth });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // left as text: the assertion shows it
  }
  return { status: res.status, body: parsed, retryAfter: res.headers.get("retry-after") };
}

/** What a refusal looks like: exactly {error} mentioning each of `mentions` (case-insensitive). */
const refusal = (status: number, mentions: string[], retryAfter: string | null = null): Answer => ({
  status,
  body: { error: expect.stringMatching(new RegExp(mentions.map((m) => `(?=[\\s\\S]*${m})`).join(""), "i")) },
  retryAfter,
});

const health = async (srv: TestServer, endpoint = "echo") => (await send(srv, "GET", `/v2/${endpoint}/health`)).body;

// ---------------------------------------------------------------------------------------------

describe("key scopes", () => {
  /** One job FAILED, one IN_PROGRESS on w1 and one IN_QUEUE, so every route has something to act on. */
  async function threeJobs(srv: TestServer) {
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await srv.json("POST", "/v2/echo/run", { input: { n } }))[1].id);
    const [failed, running, queued] = ids as [string, string, string];
    const w = protocolWorker(srv, "echo", "w1");
    expect((await w.take()).id).toBe(failed);
    await w.done(failed, { error: "boom" });
    expect((await w.take()).id).toBe(running);
    await w.stream(running, "chunk");
    return { failed, running, queued };
  }

  /** Every route that changes something: the client's writes and the whole worker protocol. */
  const writeRoutes = (j: { failed: string; running: string; queued: string }): [string, string, unknown?][] => [
    ["POST", "/v2/echo/run", { input: {} }],
    ["POST", "/v2/echo/runsync?wait=1000", { input: {} }],
    ["POST", `/v2/echo/cancel/${j.queued}`],
    ["POST", `/v2/echo/cancel/${j.running}`],
    ["POST", `/v2/echo/retry/${j.failed}`],
    ["POST", "/v2/echo/purge-queue"],
    ["GET", "/v2/echo/job-take/w2?gpu=test&job_in_progress=0"],
    ["GET", "/v2/echo/job-take-batch/w2?gpu=test&batch_size=4&job_in_progress=0"],
    ["POST", `/v2/echo/job-done/w1/${j.running}?gpu=test&isStream=false`, { output: "forged" }],
    ["POST", `/v2/echo/job-stream/w1/${j.running}?gpu=test`, { output: "forged" }],
    ["GET", `/v2/echo/ping/w2?job_id=${j.running}&runpod_version=1.12.0`],
    ["GET", "/v2/echo/job-stop/w1?gpu=test"],
    ["PUT", `/v2/echo/job-files/w1/${j.running}/out.txt`, "file body"],
  ];

  test("a read-only key reads status, status-sync, stream, health and requests, with either header form", async () => {
    await using srv = await startTestServer();
    const j = await threeJobs(srv);
    const { key } = await createKey(srv.store, "ro", srv.clock.now(), { scope: "read-only" });
    for (const auth of [`Bearer ${key}`, key]) {
      expect(await send(srv, "GET", `/v2/echo/status/${j.queued}`, undefined, auth)).toEqual({
        status: 200,
        body: { id: j.queued, status: "IN_QUEUE", queuePosition: 0 },
        retryAfter: null,
      });
      expect(await send(srv, "GET", `/v2/echo/status-sync/${j.failed}?wait=0`, undefined, auth)).toEqual({
        status: 200,
        body: {
          id: j.failed,
          status: "FAILED",
          error: "boom",
          delayTime: expect.any(Number),
          executionTime: expect.any(Number),
          workerId: "w1",
        },
        retryAfter: null,
      });
      expect(await send(srv, "GET", `/v2/echo/stream/${j.queued}`, undefined, auth)).toEqual({
        status: 200,
        body: { id: j.queued, status: "IN_QUEUE", stream: [] },
        retryAfter: null,
      });
      expect(await send(srv, "GET", "/v2/echo/health", undefined, auth)).toEqual({
        status: 200,
        body: { jobs: { ...NO_JOBS, failed: 1, inProgress: 1, inQueue: 1 }, workers: { ...NO_WORKERS, running: 1 } },
        retryAfter: null,
      });
      const page = await send(srv, "GET", "/v2/echo/requests?limit=10", undefined, auth);
      expect([page.status, page.body.requests.map((r: { id: string }) => r.id)]).toEqual([200, [j.queued, j.running, j.failed]]);
    }
  });

  test("a read-only key gets 401 saying so on every client write and every worker route, and nothing changes", async () => {
    await using srv = await startTestServer();
    const j = await threeJobs(srv);
    const { key } = await createKey(srv.store, "ro", srv.clock.now(), { scope: "read-only" });
    const before = await health(srv);
    const jobsBefore = await Promise.all([j.failed, j.running, j.queued].map((id) => srv.store.get("echo", id, srv.clock.now())));
    expect(before).toEqual({ jobs: { ...NO_JOBS, failed: 1, inProgress: 1, inQueue: 1 }, workers: { ...NO_WORKERS, running: 1 } });

    const seen: unknown[] = [];
    for (const auth of [`Bearer ${key}`, key]) {
      for (const [method, path, body] of writeRoutes(j)) {
        seen.push({ method, path, auth: auth.startsWith("Bearer") ? "bearer" : "bare", ...(await send(srv, method, path, body, auth)) });
      }
    }
    expect(seen).toEqual(
      [`bearer`, `bare`].flatMap((form) =>
        writeRoutes(j).map(([method, path]) => ({ method, path, auth: form, ...refusal(401, ["read-only"]) })),
      ),
    );

    expect(await health(srv)).toEqual(before);
    expect(await Promise.all([j.failed, j.running, j.queued].map((id) => srv.store.get("echo", id, srv.clock.now())))).toEqual(jobsBefore);
    // The chunk the worker streamed is still unread (no forged chunk joined it).
    expect((await srv.json("GET", `/v2/echo/stream/${j.running}`))[1]).toEqual({
      id: j.running,
      status: "IN_PROGRESS",
      stream: [{ output: "chunk" }],
    });
  });

  test("a full key works on every route", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const j = await threeJobs(srv);
    // The server's full key, which ran worker w1: a worker id is the key's that first used it.
    const key = srv.key;
    expect((await srv.store.listKeys()).find((k) => k.name === "test")?.scope).toBe("full");
    // The worker's file and stream posts go first, while the job still runs on w1.
    const routes = writeRoutes(j).sort(([, x], [, y]) => Number(!/job-(files|stream)/.test(x)) - Number(!/job-(files|stream)/.test(y)));
    for (const [method, path, body] of routes) {
      const pending = send(srv, method, path, body, `Bearer ${key}`);
      if (path.includes("runsync")) {
        // Nothing takes the job: let the wait run out.
        await parked(srv);
        clock.advance(1_000);
      }
      const got = await pending;
      expect({ method, path, answered: got.status === 200 || got.status === 204 ? "2xx" : got }).toEqual({ method, path, answered: "2xx" });
    }
    for (const path of [
      `/v2/echo/status/${j.running}`,
      `/v2/echo/status-sync/${j.running}?wait=0`,
      `/v2/echo/stream/${j.running}`,
      "/v2/echo/health",
      "/v2/echo/requests",
    ]) {
      expect({ path, status: (await send(srv, "GET", path, undefined, key)).status }).toEqual({ path, status: 200 });
    }
  });

  test("a key restricted to endpoint a works on a and gets 401 naming the restriction on b", async () => {
    await using srv = await startTestServer({ endpoints: { a: {}, b: {} } });
    const { key } = await createKey(srv.store, "only-a", srv.clock.now(), { endpoints: ["a"] });
    for (const auth of [`Bearer ${key}`, key]) {
      expect(await send(srv, "POST", "/v2/a/run", { input: {} }, auth)).toEqual({
        status: 200,
        body: { id: expect.any(String), status: "IN_QUEUE" },
        retryAfter: null,
      });
      expect((await send(srv, "GET", "/v2/a/job-take/w1?gpu=test", undefined, auth)).status).toBe(200);
      expect((await send(srv, "GET", "/v2/a/health", undefined, auth)).status).toBe(200);
      for (const [method, path, body] of [
        ["POST", "/v2/b/run", { input: {} }],
        ["POST", "/v2/b/runsync?wait=1000", { input: {} }],
        ["GET", "/v2/b/health"],
        ["GET", "/v2/b/requests"],
        ["GET", `/v2/b/status/${crypto.randomUUID()}`],
        ["POST", "/v2/b/purge-queue"],
        ["GET", "/v2/b/job-take/w1?gpu=test"],
        ["GET", "/v2/b/ping/w1"],
      ] as [string, string, unknown?][]) {
        expect({ method, path, ...(await send(srv, method, path, body, auth)) }).toEqual({
          method,
          path,
          ...refusal(401, ["restricted", "endpoints a"]),
        });
      }
    }
    expect(await health(srv, "b")).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
    expect(await health(srv, "a")).toEqual({ jobs: { ...NO_JOBS, inProgress: 2 }, workers: { ...NO_WORKERS, running: 1 } });
    // The server's own full key is not restricted.
    expect((await send(srv, "POST", "/v2/b/run", { input: {} })).status).toBe(200);
  });

  test("read-only and restricted together: both rules hold", async () => {
    await using srv = await startTestServer({ endpoints: { a: {}, b: {} } });
    const { key } = await createKey(srv.store, "ro-a", srv.clock.now(), { scope: "read-only", endpoints: ["a"] });
    expect((await send(srv, "GET", "/v2/a/health", undefined, key)).status).toBe(200);
    expect(await send(srv, "GET", "/v2/b/health", undefined, key)).toEqual(refusal(401, ["restricted"]));
    expect(await send(srv, "POST", "/v2/a/run", { input: {} }, key)).toEqual(refusal(401, ["read-only"]));
    expect(await health(srv, "a")).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
  });

  test("a revoked key gets 401 in both header forms; other keys go on working", async () => {
    await using srv = await startTestServer();
    const { key, record } = await createKey(srv.store, "soon-revoked", srv.clock.now(), { scope: "read-only" });
    expect((await send(srv, "GET", "/v2/echo/health", undefined, key)).status).toBe(200);
    expect(await srv.store.revokeKey(record.id, srv.clock.now())).toBe(true);
    for (const auth of [`Bearer ${key}`, key, `bearer ${key}`]) {
      expect(await send(srv, "GET", "/v2/echo/health", undefined, auth)).toEqual(refusal(401, ["revoked"]));
      expect(await send(srv, "POST", "/v2/echo/run", { input: {} }, auth)).toEqual(refusal(401, ["revoked"]));
    }
    expect((await send(srv, "GET", "/v2/echo/health")).status).toBe(200);
    expect(await health(srv)).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
  });
});

// ---------------------------------------------------------------------------------------------

describe("rate limits", () => {
  const LIMITED = {
    rateLimits: {
      run: { requests: 3 },
      status: { requests: 3, concurrent: 1 },
      cancel: { requests: 2, concurrent: 1 },
      "purge-queue": { requests: 2 },
      requests: { requests: 2, concurrent: 1 },
    },
  };

  /** A server on a manual clock that starts exactly at the start of a rate window. */
  async function limitedServer(endpoints: NonNullable<ConfigInput["endpoints"]> = { echo: LIMITED, other: LIMITED }) {
    const clock = new ManualClock();
    expect(clock.now() % WINDOW).toBe(0);
    const srv = await startTestServer({ clock, server: { rateWindowMs: WINDOW }, endpoints });
    return { srv, clock };
  }

  const run = (srv: TestServer, endpoint = "echo") => send(srv, "POST", `/v2/${endpoint}/run`, { input: {} });
  const accepted: Answer = { status: 200, body: { id: expect.any(String), status: "IN_QUEUE" }, retryAfter: null };

  test("/run: the 3rd request passes, the 4th is 429 with Retry-After = seconds left in the window, and creates nothing", async () => {
    const { srv, clock } = await limitedServer();
    await using _ = srv;
    for (let i = 0; i < 3; i++) expect(await run(srv)).toEqual(accepted);
    const limited = refusal(429, ["rate limit", "3 run requests"]);
    expect(await run(srv)).toEqual({ ...limited, retryAfter: "10" });
    clock.advance(2_500);
    expect(await run(srv)).toEqual({ ...limited, retryAfter: "8" });
    clock.advance(6_500); // 9.000 s into the window
    expect(await run(srv)).toEqual({ ...limited, retryAfter: "1" });
    clock.advance(999); // 1 ms left: still at least 1 s
    expect(await run(srv)).toEqual({ ...limited, retryAfter: "1" });
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 3 }, workers: NO_WORKERS });
    expect(await srv.store.recent("echo", clock.now(), 100)).toEqual({ jobs: [expect.anything(), expect.anything(), expect.anything()] });

    clock.advance(1); // the next window
    for (let i = 0; i < 3; i++) expect(await run(srv)).toEqual(accepted);
    expect(await run(srv)).toEqual({ ...limited, retryAfter: "10" });
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 6 }, workers: NO_WORKERS });
  });

  test("windows are per endpoint and per operation", async () => {
    const { srv } = await limitedServer();
    await using _ = srv;
    for (let i = 0; i < 3; i++) expect(await run(srv)).toEqual(accepted);
    expect((await run(srv)).status).toBe(429);
    // echo's /run window is full; its other operations and other's /run are untouched.
    const queued = (await srv.store.recent("echo", srv.clock.now(), 1)).jobs[0]!.id;
    for (let i = 0; i < 3; i++) expect((await send(srv, "GET", `/v2/echo/status/${queued}`)).status).toBe(200);
    expect(await send(srv, "GET", `/v2/echo/status/${queued}`)).toEqual(refusal(429, ["rate limit", "3 status requests"], "10"));
    for (let i = 0; i < 2; i++) expect((await send(srv, "GET", "/v2/echo/requests")).status).toBe(200);
    expect(await send(srv, "GET", "/v2/echo/requests")).toEqual(refusal(429, ["rate limit", "2 requests requests"], "10"));
    for (let i = 0; i < 3; i++) expect(await run(srv, "other")).toEqual(accepted);
    expect((await run(srv, "other")).status).toBe(429);
    // other's status window is its own: the job is not there, but the request is let through to say so.
    expect((await send(srv, "GET", `/v2/other/status/${queued}`)).status).toBe(404);
    // Operations without a limit are never refused.
    for (let i = 0; i < 10; i++) expect((await send(srv, "GET", "/v2/echo/health")).status).toBe(200);
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 3 }, workers: NO_WORKERS });
    expect(await health(srv, "other")).toEqual({ jobs: { ...NO_JOBS, inQueue: 3 }, workers: NO_WORKERS });
  });

  test("/cancel: 2 per window; the refused cancel leaves its job queued", async () => {
    const { srv, clock } = await limitedServer();
    await using _ = srv;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await run(srv)).body.id);
    const [a, b, c] = ids as [string, string, string];
    expect(await send(srv, "POST", `/v2/echo/cancel/${a}`)).toEqual({
      status: 200,
      body: { id: a, status: "CANCELLED" },
      retryAfter: null,
    });
    expect(await send(srv, "POST", `/v2/echo/cancel/${b}`)).toEqual({
      status: 200,
      body: { id: b, status: "CANCELLED" },
      retryAfter: null,
    });
    clock.advance(4_001);
    expect(await send(srv, "POST", `/v2/echo/cancel/${c}`)).toEqual(refusal(429, ["rate limit", "2 cancel requests"], "6"));
    expect((await srv.json("GET", `/v2/echo/status/${c}`))[1]).toEqual({ id: c, status: "IN_QUEUE", queuePosition: 0 });
    clock.advance(WINDOW - 4_001);
    expect(await send(srv, "POST", `/v2/echo/cancel/${c}`)).toEqual({
      status: 200,
      body: { id: c, status: "CANCELLED" },
      retryAfter: null,
    });
  });

  test("/purge-queue: 2 per window; the refused purge leaves the queue as it was", async () => {
    const { srv, clock } = await limitedServer();
    await using _ = srv;
    const purged = (removed: number): Answer => ({ status: 200, body: { removed, status: "completed" }, retryAfter: null });
    expect(await send(srv, "POST", "/v2/echo/purge-queue")).toEqual(purged(0));
    expect(await send(srv, "POST", "/v2/echo/purge-queue")).toEqual(purged(0));
    await run(srv);
    await run(srv);
    expect(await send(srv, "POST", "/v2/echo/purge-queue")).toEqual(refusal(429, ["rate limit", "2 purge-queue requests"], "10"));
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 2 }, workers: NO_WORKERS });
    clock.advance(WINDOW);
    expect(await send(srv, "POST", "/v2/echo/purge-queue")).toEqual(purged(2));
    expect(await health(srv)).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
  });

  test("a concurrent limit: while one status-sync is parked a second status request is 429; refused ones are not counted", async () => {
    const { srv, clock } = await limitedServer();
    await using _ = srv;
    const {
      body: { id },
    } = await run(srv);
    const pending = srv.json("GET", `/v2/echo/status-sync/${id}?wait=5000`); // status request 1 of 3
    await parked(srv);
    const concurrent = refusal(429, ["rate limit", "1 concurrent status"], "1");
    expect(await send(srv, "GET", `/v2/echo/status/${id}`)).toEqual(concurrent);
    expect(await send(srv, "GET", `/v2/echo/status-sync/${id}?wait=0`)).toEqual(concurrent);
    // In flight is per endpoint too.
    expect((await send(srv, "GET", `/v2/other/status/${id}`)).status).toBe(404);
    clock.advance(5_000);
    expect(await pending).toEqual([200, { id, status: "IN_QUEUE" }]);
    // Two more fit in the window: the two refused above did not use it up.
    expect(await send(srv, "GET", `/v2/echo/status/${id}`)).toEqual({
      status: 200,
      body: { id, status: "IN_QUEUE", queuePosition: 0 },
      retryAfter: null,
    });
    expect(await send(srv, "GET", `/v2/echo/status/${id}`)).toEqual({
      status: 200,
      body: { id, status: "IN_QUEUE", queuePosition: 0 },
      retryAfter: null,
    });
    expect(await send(srv, "GET", `/v2/echo/status/${id}`)).toEqual(refusal(429, ["rate limit", "3 status requests"], "5"));
  });

  test("the defaults are the specification's table", () => {
    const config = parseConfig({ endpoints: { x: {} } });
    expect(config.server.rateWindowMs).toBe(10_000);
    expect(config.endpoints.x!.rateLimits).toStrictEqual({
      runsync: { requests: 2000, concurrent: 400 },
      run: { requests: 1000, concurrent: 200 },
      status: { requests: 2000, concurrent: 400 },
      stream: { requests: 2000, concurrent: 400 },
      cancel: { requests: 100, concurrent: 20 },
      "purge-queue": { requests: 2 },
      // /compat/* of the spec
      openai: { requests: 2000, concurrent: 400 },
      requests: { requests: 10, concurrent: 2 },
    });
    expect(config.endpoints.x!.rateLimits).toStrictEqual(RATE_LIMITS);
    // Setting one operation leaves the others at the defaults.
    const partial = parseConfig({ endpoints: { x: { rateLimits: { run: { requests: 3 } } } } }).endpoints.x!.rateLimits;
    expect(partial).toStrictEqual({ ...RATE_LIMITS, run: { requests: 3 } });
  });

  test("the default limits are in force: purge-queue 2 and requests 10 per 10 s", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, endpoints: { echo: {} } });
    for (let i = 0; i < 2; i++) expect((await send(srv, "POST", "/v2/echo/purge-queue")).status).toBe(200);
    expect(await send(srv, "POST", "/v2/echo/purge-queue")).toEqual(refusal(429, ["rate limit", "2 purge-queue requests per 10 s"], "10"));
    for (let i = 0; i < 10; i++) expect((await send(srv, "GET", "/v2/echo/requests")).status).toBe(200);
    expect(await send(srv, "GET", "/v2/echo/requests")).toEqual(refusal(429, ["rate limit", "10 requests requests per 10 s"], "10"));
    clock.advance(WINDOW);
    expect((await send(srv, "POST", "/v2/echo/purge-queue")).status).toBe(200);
    expect((await send(srv, "GET", "/v2/echo/requests")).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------

describe("backpressure (429 when the queue holds more than 50 and more than workersMax * 500 jobs)", () => {
  test("workersMax 0: the 51st job is accepted; with 51 queued /run and /runsync are 429 and add nothing", async () => {
    await using srv = await startTestServer({ endpoints: { echo: { workersMax: 0 } } });
    for (let i = 0; i < 51; i++) {
      const got = await send(srv, "POST", "/v2/echo/run", { input: { i } });
      expect({ i, status: got.status }).toEqual({ i, status: 200 });
    }
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 51 }, workers: NO_WORKERS });
    const full = refusal(429, ["queue", "51 jobs"], "1");
    expect(await send(srv, "POST", "/v2/echo/run", { input: {} })).toEqual(full);
    expect(await send(srv, "POST", "/v2/echo/runsync?wait=1000", { input: {} })).toEqual(full);
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 51 }, workers: NO_WORKERS });

    // One taken: 50 queued, so one more fits, and then the queue is full again.
    await protocolWorker(srv, "echo", "w1").take();
    expect((await send(srv, "POST", "/v2/echo/run", { input: {} })).status).toBe(200);
    expect(await send(srv, "POST", "/v2/echo/run", { input: {} })).toEqual(full);
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inProgress: 1, inQueue: 51 }, workers: { ...NO_WORKERS, running: 1 } });
  });

  test("workersMax 1: the threshold is 500 queued jobs", async () => {
    await using srv = await startTestServer({ endpoints: { echo: { workersMax: 1 } } });
    const policy = { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 };
    for (let i = 0; i < 500; i++) {
      await srv.store.enqueue({ id: crypto.randomUUID(), endpointId: "echo", input: { i }, policy, sync: false }, srv.clock.now());
    }
    // 500 is not more than 1 * 500.
    expect((await send(srv, "POST", "/v2/echo/run", { input: {} })).status).toBe(200);
    expect(await send(srv, "POST", "/v2/echo/run", { input: {} })).toEqual(refusal(429, ["queue", "501 jobs"], "1"));
    expect(await send(srv, "POST", "/v2/echo/runsync?wait=1000", { input: {} })).toEqual(refusal(429, ["queue"], "1"));
    expect((await health(srv)).jobs.inQueue).toBe(501);
  });

  test("the queue of one endpoint does not hold back another; expired jobs do not count", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, endpoints: { echo: { workersMax: 0 }, other: { workersMax: 0 } } });
    for (let i = 0; i < 51; i++) expect((await send(srv, "POST", "/v2/echo/run", { input: {}, policy: { ttl: 10_000 } })).status).toBe(200);
    expect((await send(srv, "POST", "/v2/echo/run", { input: {} })).status).toBe(429);
    expect((await send(srv, "POST", "/v2/other/run", { input: {} })).status).toBe(200);
    clock.advance(10_000);
    expect((await send(srv, "POST", "/v2/echo/run", { input: {} })).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------

describe("webhookBlockPrivate", () => {
  const PRIVATE_WEBHOOKS = [
    "http://127.0.0.1:9/x",
    "http://localhost/x",
    "http://LOCALHOST:8080/x",
    "http://app.localhost/x",
    "http://10.1.2.3/x",
    "http://172.16.0.1/x",
    "http://192.168.1.1/x",
    "http://100.64.0.1/x",
    "http://0.0.0.0/x",
    "http://[::1]/x",
    "http://[::]/x",
    "http://[fd00::1]/x",
    "http://[fe80::1]/x",
    "http://169.254.169.254/x",
    // Other spellings of 127.0.0.1 that URL parsing turns into it.
    "http://127.1/x",
    "http://2130706433/x",
    "http://0x7f000001/x",
    "https://127.0.0.1/x",
  ];

  test("a webhook on a private, loopback or link-local address is 400 naming webhook, and nothing is queued", async () => {
    await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: [] } });
    for (const webhook of PRIVATE_WEBHOOKS) {
      for (const route of ["run", "runsync?wait=1000"]) {
        expect({ webhook, route, ...(await send(srv, "POST", `/v2/echo/${route}`, { input: {}, webhook })) }).toEqual({
          webhook,
          route,
          ...refusal(400, ["webhook", "private"]),
        });
      }
    }
    expect(await health(srv)).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
    // A public literal is accepted (no request is made at submission).
    expect(await send(srv, "POST", "/v2/echo/run", { input: {}, webhook: "http://93.184.216.34/x" })).toEqual({
      status: 200,
      body: { id: expect.any(String), status: "IN_QUEUE" },
      retryAfter: null,
    });
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 1 }, workers: NO_WORKERS });
  });

  test("on by default: with no webhook settings a loopback receiver is 400 naming webhook, nothing is queued or called", async () => {
    await using receiver = startReceiver();
    await using srv = await startTestServer({ loopbackWebhooks: false });
    for (const route of ["run", "runsync?wait=1000"]) {
      expect({ route, ...(await send(srv, "POST", `/v2/echo/${route}`, { input: {}, webhook: receiver.url })) }).toEqual({
        route,
        ...refusal(400, ["webhook"]),
      });
    }
    expect(await health(srv)).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
    expect(receiver.calls).toEqual([]);
  });

  test("a loopback receiver named in webhookAllow is accepted and queued", async () => {
    await using srv = await startTestServer({ loopbackWebhooks: false, server: { webhookAllow: ["127.0.0.1"] } });
    expect(await send(srv, "POST", "/v2/echo/run", { input: {}, webhook: "http://127.0.0.1:9/x" })).toEqual({
      status: 200,
      body: { id: expect.any(String), status: "IN_QUEUE" },
      retryAfter: null,
    });
    expect(await health(srv)).toEqual({ jobs: { ...NO_JOBS, inQueue: 1 }, workers: NO_WORKERS });
  });

  test("an IPv4-mapped IPv6 literal of a private address is refused", async () => {
    await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: [] } });
    for (const webhook of [
      "http://[::ffff:127.0.0.1]/x",
      "http://[::ffff:169.254.169.254]/latest/meta-data",
      "http://[::ffff:10.0.0.1]/x",
    ]) {
      expect({ webhook, ...(await send(srv, "POST", "/v2/echo/run", { input: {}, webhook })) }).toEqual({
        webhook,
        ...refusal(400, ["webhook"]),
      });
    }
    expect(await health(srv)).toEqual({ jobs: NO_JOBS, workers: NO_WORKERS });
  });

  test("a fully qualified localhost. webhook is refused", async () => {
    await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: [] } });
    for (const webhook of ["http://localhost./x", "http://app.localhost./x"]) {
      expect({ webhook, ...(await send(srv, "POST", "/v2/echo/run", { input: {}, webhook })) }).toEqual({
        webhook,
        ...refusal(400, ["webhook"]),
      });
    }
  });

  test("isPrivateAddress: a table of v4, v6 and v4-mapped v6 addresses, both ways", () => {
    const table: Record<string, boolean> = {
      // private, loopback, link-local, CGNAT, unspecified, multicast and reserved
      "127.0.0.1": true,
      "127.255.255.254": true,
      "10.0.0.0": true,
      "10.255.255.255": true,
      "172.16.0.0": true,
      "172.31.255.255": true,
      "192.168.0.0": true,
      "192.168.255.255": true,
      "169.254.0.0": true,
      "169.254.169.254": true,
      "169.254.255.255": true,
      "100.64.0.0": true,
      "192.0.0.8": true,
      "198.18.0.1": true,
      "198.19.255.254": true,
      "198.20.0.1": false,
      "192.0.3.1": false,
      "100.127.255.255": true,
      "0.0.0.0": true,
      "0.255.255.255": true,
      "224.0.0.1": true,
      "239.255.255.250": true,
      "255.255.255.255": true,
      "::1": true,
      "::": true,
      "fc00::": true,
      "fd12:3456:789a::1": true,
      "FD00::1": true,
      "fe80::1": true,
      "febf:ffff::1": true,
      "ff02::1": true,
      "::ffff:127.0.0.1": true,
      "::ffff:10.1.2.3": true,
      "::FFFF:192.168.1.1": true,
      "::ffff:169.254.169.254": true,
      // public
      "8.8.8.8": false,
      "1.1.1.1": false,
      "93.184.216.34": false,
      "9.255.255.255": false,
      "11.0.0.0": false,
      "126.255.255.255": false,
      "128.0.0.0": false,
      "172.15.255.255": false,
      "172.32.0.0": false,
      "192.167.255.255": false,
      "192.169.0.0": false,
      "169.253.255.255": false,
      "169.255.0.0": false,
      "100.63.255.255": false,
      "100.128.0.0": false,
      "223.255.255.255": false,
      "2001:4860:4860::8888": false,
      "2606:4700:4700::1111": false,
      "2a00:1450:4001::1": false,
      "fe7f::1": false,
      "fec0::1": false,
      "::ffff:8.8.8.8": false,
      "::ffff:93.184.216.34": false,
    };
    const got = Object.fromEntries(Object.keys(table).map((ip) => [ip, isPrivateAddress(ip)]));
    expect(got).toEqual(table);
  });

  test("isPrivateAddress: IPv4-mapped addresses in hex spelling", () => {
    const table: Record<string, boolean> = {
      "::ffff:7f00:1": true, // 127.0.0.1
      "::ffff:a9fe:a9fe": true, // 169.254.169.254
      "::ffff:a00:1": true, // 10.0.0.1
      "::ffff:c0a8:101": true, // 192.168.1.1
      "::ffff:808:808": false, // 8.8.8.8
    };
    const got = Object.fromEntries(Object.keys(table).map((ip) => [ip, isPrivateAddress(ip)]));
    expect(got).toEqual(table);
  });
});

// ---------------------------------------------------------------------------------------------

describe("secrets", () => {
  /** Every file under `dir`, as text. */
  const filesUnder = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? filesUnder(path) : [readFileSync(path, "latin1")];
    });

  test("neither the API key nor an s3Config secret appears in a log line or a response body", async () => {
    const SECRET = "very-secret-value";
    const log = new MemoryLog();
    // Webhook retries go at once so the failing deliveries (port 9 refuses) are logged quickly.
    await using srv = await startTestServer({ log, server: { webhookRetryDelayMs: 0, webhookTimeoutMs: 2_000 } });
    const { key: roKey } = await createKey(srv.store, "ro", srv.clock.now(), { scope: "read-only" });
    const s3Config = { accessId: "AKIA-access-id", accessSecret: SECRET, bucketName: "bucket", endpointUrl: "http://127.0.0.1:9/" };
    const responses: string[] = [];
    const record = async (method: string, path: string, body?: unknown, auth?: string | null) => {
      const res = await srv.call(method, path, body, { auth });
      const text = await res.text();
      responses.push(`${method} ${path} -> ${res.status} ${[...res.headers].join(" ")} ${text}`);
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };

    const a = (await record("POST", "/v2/echo/run", { input: { n: 1 }, s3Config, webhook: "http://127.0.0.1:9/hook" })).body.id as string;
    const b = (await record("POST", "/v2/echo/run", { input: { n: 2 }, s3Config })).body.id as string;
    // Failing requests that carry the secret or the key.
    expect((await record("POST", "/v2/echo/run", { input: {}, s3Config: { ...s3Config, endpointUrl: "not a url" } })).status).toBe(400);
    expect((await record("POST", "/v2/echo/run", { input: {}, s3Config: { ...s3Config, accessId: 7 } })).status).toBe(400);
    expect((await record("POST", "/v2/echo/run", { input: [], s3Config: { ...s3Config, extra: SECRET } })).status).toBe(400);
    expect((await record("POST", "/v2/echo/run", `{"input": {}, "s3Config": {"accessSecret": "${SECRET}"`)).status).toBe(400);
    expect((await record("POST", "/v2/echo/run", { input: {}, s3Config }, `Token ${srv.key}`)).status).toBe(401);
    expect((await record("POST", "/v2/echo/run", { input: {}, s3Config }, roKey)).status).toBe(401);
    expect((await record("POST", "/v2/nope/run", { input: {}, s3Config })).status).toBe(404);

    // The worker gets s3Config (that is what it is for) and fails the job, which is retried and completed.
    const w = protocolWorker(srv, "echo", "w1");
    const taken = await w.take();
    expect([taken.id, taken.s3Config]).toEqual([a, s3Config]);
    await w.done(a, { error: "boom" });
    expect((await record("GET", `/v2/echo/status/${a}`)).body.status).toBe("FAILED");
    expect((await record("POST", `/v2/echo/retry/${a}`)).body.status).toBe("IN_QUEUE");
    expect((await w.take()).id).toBe(b);
    const again = await w.take();
    expect([again.id, again.s3Config]).toEqual([a, s3Config]);
    await w.stream(a, { partial: 1 });
    await w.done(a, { output: { ok: true } });
    for (const path of [
      `/v2/echo/status/${a}`,
      `/v2/echo/status-sync/${a}?wait=0`,
      `/v2/echo/stream/${a}`,
      `/v2/echo/status/${b}`,
      "/v2/echo/requests",
      "/v2/echo/health",
    ]) {
      expect((await record("GET", path)).status).toBe(200);
      expect((await record("GET", path, undefined, roKey)).status).toBe(200);
    }
    expect((await record("POST", `/v2/echo/cancel/${b}`)).body.status).toBe("CANCELLED");
    expect((await record("POST", "/v2/echo/purge-queue")).status).toBe(200);

    // Both endings of job a owe a webhook to a port that refuses: wait (for the network, not for
    // time) until the sender has logged about it.
    await until(() => log.lines.filter((l) => l.includes(a)).length >= 2, "two log lines about job a's webhook");

    for (const secret of [SECRET, srv.key, roKey]) {
      expect(log.lines.filter((l) => l.includes(secret))).toEqual([]);
      expect(responses.filter((r) => r.includes(secret))).toEqual([]);
    }
    // The store keeps keys only as hashes.
    for (const text of filesUnder(srv.dataDir)) {
      expect(text.includes(srv.key)).toBe(false);
      expect(text.includes(roKey)).toBe(false);
    }
  });
});

describe("read-only keys and job lifetimes", () => {
  test("a read-only key cannot change a job's lifetime through status?ttl", async () => {
    await using srv = await startTestServer();
    const { key } = await createKey(srv.store, "ro", Date.now(), { scope: "read-only" });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const before = await srv.store.get("echo", id, Date.now());
    const [code, body] = await srv.json("GET", `/v2/echo/status/${id}?ttl=20000`, undefined, { auth: `Bearer ${key}` });
    expect(code).toBe(401);
    expect(body.error).toContain("read-only");
    expect((await srv.store.get("echo", id, Date.now()))!.expiresAt).toBe(before!.expiresAt);
    expect((await srv.call("GET", `/v2/echo/status/${id}`, undefined, { auth: key })).status).toBe(200);
  });
});

describe("client and worker keys", () => {
  test("a client key cannot act as a worker; a worker key cannot use the job API", async () => {
    await using srv = await startTestServer();
    const client = await createKey(srv.store, "client", Date.now(), { scope: "client" });
    const worker = await createKey(srv.store, "worker", Date.now(), { scope: "worker" });
    const s3Config = { accessId: "AK", accessSecret: "s3-secret", bucketName: "b", endpointUrl: "http://127.0.0.1:9/" };
    const [code, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, s3Config }, { auth: `Bearer ${client.key}` });
    expect(code).toBe(200);

    const asClient = await srv.call("GET", "/v2/echo/job-take/evil?gpu=x", undefined, { auth: client.key });
    expect(asClient.status).toBe(401);
    expect(await asClient.text()).not.toContain("s3-secret");
    expect((await srv.json("GET", "/v2/echo/run", undefined, { auth: worker.key }))[0]).toBe(401);
    const [wcode, wbody] = await srv.json("POST", "/v2/echo/run", { input: {} }, { auth: worker.key });
    expect(wcode).toBe(401);
    expect(wbody.error).toContain("worker key");

    const taken = await srv.call("GET", "/v2/echo/job-take/w1?gpu=x", undefined, { auth: worker.key });
    expect(((await taken.json()) as { id: string }).id).toBe(id);
    expect((await srv.json("GET", `/v2/echo/status/${id}`, undefined, { auth: `Bearer ${client.key}` }))[1].status).toBe("IN_PROGRESS");
  });

  test("path segments named like object properties are 404, not 500", async () => {
    await using srv = await startTestServer();
    for (const seg of ["__proto__", "constructor", "toString", "valueOf", "hasOwnProperty"]) {
      const [code, body] = await srv.json("GET", `/v2/echo/${seg}`);
      expect({ seg, code }).toEqual({ seg, code: 404 });
      expect(body).toEqual({ error: expect.any(String) });
    }
  });
});
