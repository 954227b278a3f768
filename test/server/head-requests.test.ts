import { describe, expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

/** A HEAD request as curl -I sends it; its body (if any) is never read. */
const head = (url: string, key: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: "HEAD", headers: { authorization: `Bearer ${key}`, ...headers } });

describe("HEAD requests change nothing and hold nothing", () => {
  test("a HEAD of a job's status as an event stream holds no rate-limit slot", async () => {
    await using srv = await startTestServer({ endpoints: { echo: { rateLimits: { status: { requests: 1000, concurrent: 2 } } } } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const heads = await Promise.all([1, 2, 3].map(() => head(`${srv.url}/v2/echo/status/${id}`, srv.key, { accept: "text/event-stream" })));
    // Answered as the polling route is: headers only, no stream left open behind them.
    expect(heads.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(heads.map((r) => r.headers.get("content-type"))).toEqual(Array(3).fill("application/json"));
    const [status, body] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(status).toBe(200);
    expect(body.status).toBe("IN_QUEUE");
  });

  test("a HEAD of job-take is refused and hands out no job", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    for (const path of ["job-take/w1", "job-take-batch/w1?batch_size=4", "job-stop/w1", "ping/w1", `stream/${id}`, `status-sync/${id}`]) {
      const res = await head(`${srv.url}/v2/echo/${path}`, srv.key);
      expect({ path, status: res.status, allow: res.headers.get("allow") }).toEqual({ path, status: 405, allow: "GET" });
    }
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1].status).toBe("IN_QUEUE");
    // The job is still there for a worker that asks with GET.
    expect((await protocolWorker(srv, "echo", "w1").take()).id).toBe(id);
  });

  test("a HEAD of status with ?ttl changes no lifetime; a plain HEAD of status is answered", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    expect((await head(`${srv.url}/v2/echo/status/${id}?ttl=10000`, srv.key)).status).toBe(405);
    expect((await srv.store.get("echo", id, Date.now()))!.expiresAt).toBeGreaterThan(Date.now() + 3600_000);
    expect((await head(`${srv.url}/v2/echo/status/${id}`, srv.key)).status).toBe(200);
  });

  test("a HEAD of an OpenAI route submits no job", async () => {
    await using srv = await startTestServer();
    const res = await head(`${srv.url}/v2/echo/openai/v1/models`, srv.key);
    expect([res.status, res.headers.get("allow")]).toEqual([405, "GET"]);
    const chat = await head(`${srv.url}/v2/echo/openai/v1/chat/completions`, srv.key);
    expect([chat.status, chat.headers.get("allow")]).toEqual([405, "POST"]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
  });

  test("a HEAD of the dashboard's event stream is refused and opens no stream", async () => {
    await using srv = await startTestServer();
    const res = await head(`${srv.url}/dashboard/api/events`, srv.key);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });
});
