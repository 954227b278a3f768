import { describe, expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { silentLog } from "../../runtime/log.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { startServer } from "../../runtime/server/serve.ts";
import { createStore, storeOptions } from "../../runtime/server/store/create-store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { parked, startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

interface Event {
  event: string;
  id: string;
  data: any;
}

/** A server-sent event stream read event by event, as a browser's EventSource would. */
async function openEvents(srv: TestServer, path: string, lastEventId?: string) {
  const abort = new AbortController();
  const res = await fetch(`${srv.url}${path}`, {
    headers: { authorization: `Bearer ${srv.key}`, accept: "text/event-stream", ...(lastEventId ? { "last-event-id": lastEventId } : {}) },
    signal: abort.signal,
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    res,
    /** The next event, or null once the server has ended the stream. Comments are skipped. */
    async next(): Promise<Event | null> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(
            block
              .split("\n")
              .filter((l) => !l.startsWith(":"))
              .map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]),
          );
          if (fields.data === undefined) continue;
          return { event: fields.event!, id: fields.id!, data: JSON.parse(fields.data) };
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += value;
      }
    },
    async rest(): Promise<Event[]> {
      const all: Event[] = [];
      for (let e = await this.next(); e; e = await this.next()) all.push(e);
      return all;
    },
    close: () => abort.abort(),
  };
}

const strip = (events: Event[]) => events.map(({ event, data }) => ({ event, data }));

describe("server-sent events across servers", () => {
  test("a stream on one server gets the chunks and the end a worker posts to another (one Redis)", async () => {
    const url = `${await redisUrl()}?prefix=sse-${crypto.randomUUID().slice(0, 8)}`;
    const dirs = [mkdtempSync(join(tmpdir(), "spool-sse-")), mkdtempSync(join(tmpdir(), "spool-sse-"))];
    const servers = await Promise.all(
      dirs.map(async (data) => {
        const config = parseConfig({
          server: { port: 0, host: "127.0.0.1", data, streamWaitMs: 0 },
          endpoints: { echo: { workersMax: 0 } },
        });
        const store = await createStore(url, storeOptions(config));
        return { store, server: startServer({ config, store, log: silentLog }) };
      }),
    );
    try {
      const { key } = await createKey(servers[0]!.store, "sse", Date.now());
      const [a, b] = servers.map((s) => s.server.url) as [string, string];
      const auth = { authorization: `Bearer ${key}` };
      const post = (base: string, path: string, body: unknown) =>
        fetch(`${base}/v2/echo/${path}`, { method: "POST", headers: auth, body: JSON.stringify(body) });
      const { id } = (await (await post(a, "run", { input: {} })).json()) as { id: string };
      const res = await fetch(`${a}/v2/echo/stream/${id}`, { headers: { ...auth, accept: "text/event-stream" } });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      const readUntil = async (what: string) => {
        while (!text.includes(what)) text += (await reader.read()).value ?? "";
      };
      await readUntil('"IN_QUEUE"');
      await fetch(`${b}/v2/echo/job-take/w1`, { headers: auth });
      await post(b, `job-stream/w1/${id}`, { output: "from b" });
      await readUntil('"from b"');
      await post(b, `job-done/w1/${id}`, { output: "end" });
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
      const events = text
        .split("\n\n")
        .filter((e) => e.includes("data: "))
        .map((e) => /event: (\w+)/.exec(e)![1]);
      expect(events).toEqual(["status", "status", "chunk", "status"]);
      expect(text).toContain('"status":"COMPLETED","delayTime"');
    } finally {
      for (const s of servers) {
        await s.server.stop();
        await s.store.close();
      }
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });
});

describe("server-sent events for jobs", () => {
  test("each chunk and status change is an event; a reconnect with Last-Event-ID gets exactly the missed ones", async () => {
    await using srv = await startTestServer();
    const worker = protocolWorker(srv, "echo", "w1");
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { n: 1 } });
    const first = await openEvents(srv, `/v2/echo/stream/${id}`);
    expect(first.res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    // The status event is the /status answer of that moment (a queued job with its position).
    expect(strip([(await first.next())!])).toEqual([{ event: "status", data: { id, status: "IN_QUEUE", queuePosition: 0 } }]);
    await worker.take();
    expect(strip([(await first.next())!])).toEqual([
      { event: "status", data: { id, status: "IN_PROGRESS", delayTime: expect.any(Number), workerId: "w1" } },
    ]);
    await worker.stream(id, "a");
    await worker.stream(id, "b");
    const a = (await first.next())!;
    const b = (await first.next())!;
    expect(strip([a, b])).toEqual([
      { event: "chunk", data: { output: "a" } },
      { event: "chunk", data: { output: "b" } },
    ]);
    first.close();

    // While nobody listens: two more chunks and the end.
    await worker.stream(id, "c");
    await worker.stream(id, { d: 4 });
    await worker.done(id, { output: "done" });

    const resumed = await openEvents(srv, `/v2/echo/stream/${id}`, b.id);
    const missed = await resumed.rest();
    const [, final] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(strip(missed)).toEqual([
      { event: "chunk", data: { output: "c" } },
      { event: "chunk", data: { output: { d: 4 } } },
      { event: "status", data: final },
    ]);
    expect(final.status).toBe("COMPLETED");
    // Every id is distinct and a reconnect after the last one gets nothing more.
    const ids = [a.id, b.id, ...missed.map((e) => e.id)];
    expect(new Set(ids).size).toBe(ids.length);
    expect(await (await openEvents(srv, `/v2/echo/status/${id}`, missed.at(-1)!.id)).rest()).toEqual([]);
    // /status with the header gives the same events from the start.
    expect(strip(await (await openEvents(srv, `/v2/echo/status/${id}`)).rest())).toEqual([
      ...["a", "b", "c", { d: 4 }].map((output) => ({ event: "chunk", data: { output } })),
      { event: "status", data: final },
    ]);
    // The events took nothing from a client that polls /stream: it still gets every chunk.
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({
      id,
      status: "COMPLETED",
      stream: [{ output: "a" }, { output: "b" }, { output: "c" }, { output: { d: 4 } }],
    });
  });

  test("progress is a status event; a failed job ends the stream with its error", async () => {
    await using srv = await startTestServer();
    const worker = protocolWorker(srv, "echo", "w1");
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await worker.take();
    const events = await openEvents(srv, `/v2/echo/status/${id}`);
    expect((await events.next())!.data.status).toBe("IN_PROGRESS");
    await worker.done(id, { status: "IN_PROGRESS", output: { pct: 50 } });
    expect(strip([(await events.next())!])).toEqual([
      { event: "status", data: { id, status: "IN_PROGRESS", delayTime: expect.any(Number), output: { pct: 50 }, workerId: "w1" } },
    ]);
    await worker.done(id, { error: "boom" });
    const rest = await events.rest();
    expect(rest.map((e) => [e.event, e.data.status, e.data.error])).toEqual([["status", "FAILED", "boom"]]);
  });

  test("without the header /status and /stream answer exactly as before", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const status = await srv.call("GET", `/v2/echo/status/${id}`, undefined, { headers: { accept: "application/json" } });
    expect(status.headers.get("content-type")).toBe("application/json");
    expect(await status.json()).toEqual({ id, status: "IN_QUEUE", queuePosition: 0 });
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1]).toEqual({ id, status: "IN_QUEUE", stream: [] });
  });

  test("bad requests are refused with a clear error before any stream starts", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const sse = { accept: "text/event-stream" };
    const missing = await srv.call("GET", "/v2/echo/stream/nope", undefined, { headers: sse });
    expect([missing.status, await missing.json()]).toEqual([404, { error: "job nope not found (unknown, purged or expired)" }]);
    const badId = await srv.call("GET", `/v2/echo/stream/${id}`, undefined, { headers: { ...sse, "last-event-id": "x" } });
    expect([badId.status, await badId.json()]).toEqual([400, { error: 'Last-Event-ID "x" is not an event id of this stream' }]);
    const ttl = await srv.call("GET", `/v2/echo/status/${id}?ttl=60000`, undefined, { headers: sse });
    expect(ttl.status).toBe(400);
    const noKey = await srv.call("GET", `/v2/echo/stream/${id}`, undefined, { headers: sse, auth: null });
    expect(noKey.status).toBe(401);
  });

  test("an open stream holds its concurrent rate-limit slot until it ends", async () => {
    await using srv = await startTestServer({ endpoints: { echo: { rateLimits: { stream: { requests: 1000, concurrent: 1 } } } } });
    const worker = protocolWorker(srv, "echo", "w1");
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const events = await openEvents(srv, `/v2/echo/stream/${id}`);
    await events.next();
    expect((await srv.call("GET", `/v2/echo/stream/${id}`)).status).toBe(429);
    await worker.take();
    await worker.done(id, { output: 1 });
    await events.rest();
    // The slot is given back once the stream has ended (its release runs just after the last byte).
    await until(async () => (await srv.call("GET", `/v2/echo/stream/${id}`)).status === 200, "the stream's slot to be given back");
  });

  test("a stream ends with a gone event when its job expires", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, policy: { ttl: 10_000 } });
    const events = await openEvents(srv, `/v2/echo/stream/${id}`);
    expect((await events.next())!.data.status).toBe("IN_QUEUE");
    await parked(srv);
    clock.advance(10_000);
    await srv.server.sweep();
    expect(strip(await events.rest())).toEqual([{ event: "gone", data: { id, error: `job ${id} not found (purged or expired)` } }]);
  });
});
