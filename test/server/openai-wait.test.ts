import { describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ManualClock } from "../../runtime/clock.ts";
import { LIMITS } from "../../runtime/protocol/limits.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { parked, startTestServer, type TestServer } from "../helpers/test-server.ts";

// The OpenAI-compatible routes answer in bounded time: an endpoint with no worker (here `vllm`,
// served by outside workers, so the server knows no input schema) gets an error the official
// client retries on once the wait is over, and its job is cancelled. A stream waiting for its
// first token sends SSE comments meanwhile. Time moves only through a ManualClock.

const WAIT = 5_000;
const KEEPALIVE = 1_000;
const messages = [{ role: "user" as const, content: "Hi" }];

async function server(endpoint: Record<string, unknown> = { openaiWaitMs: WAIT }): Promise<TestServer> {
  return startTestServer({
    clock: new ManualClock(),
    server: { sseKeepAliveMs: KEEPALIVE, takeWaitMs: 0 },
    endpoints: { vllm: { ...endpoint, rateLimits: { requests: { requests: 1_000_000 } } } },
  });
}

function openai(srv: TestServer, maxRetries = 0, iface = "openai"): OpenAI {
  return new OpenAI({ apiKey: srv.key, baseURL: `${srv.url}/v2/vllm/${iface}/v1`, maxRetries });
}

/** Waits (on the event loop, not on time) until `n` requests are parked on the manual clock. */
async function parkedRequests(srv: TestServer, n = 1): Promise<void> {
  await parked(srv, n);
  expect((srv.clock as ManualClock).sleeping).toBe(srv.baseSleepers + n);
}

/** Parks, then moves the clock by `ms`. */
async function pass(srv: TestServer, ms: number): Promise<void> {
  await parkedRequests(srv);
  (srv.clock as ManualClock).advance(ms);
}

async function failure(call: PromiseLike<unknown>): Promise<any> {
  return call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (err: unknown) => err,
  );
}

/** Every job the endpoint has, newest first, as [status] only. */
async function statuses(srv: TestServer): Promise<string[]> {
  const [, page] = await srv.json("GET", "/v2/vllm/requests?limit=100");
  return page.requests.map((r: { status: string }) => r.status);
}

/** Reads an SSE body as text until `until` appears in what was read so far. */
/** Reads an SSE body into `seen.text` until `until` appears in it, or (null) to its end. */
async function readUntil(
  reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> },
  seen: { text: string },
  until: string | null,
): Promise<void> {
  const decoder = new TextDecoder();
  while (until === null || !seen.text.includes(until)) {
    const { done, value } = await reader.read();
    if (done && until === null) return;
    if (done) throw new Error(`stream ended before ${JSON.stringify(until)}; got ${JSON.stringify(seen.text)}`);
    seen.text += decoder.decode(value, { stream: true });
  }
}

describe("OpenAI routes wait in bounded time", () => {
  test("with no worker, a chat completion waits as long as /runsync, then 503 and the job is cancelled", async () => {
    await using srv = await server({});
    const call = failure(openai(srv).chat.completions.create({ model: "m", messages }));
    await pass(srv, LIMITS.runsyncWaitDefault - 1);
    await pass(srv, 1);
    const err = await call;
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect({ status: err.status, type: err.type, code: err.code, param: err.param }).toEqual({
      status: 503,
      type: "server_error",
      code: "no_worker",
      param: null,
    });
    expect(err.message).toContain("no worker took the request within 90 s");
    expect(await statuses(srv)).toEqual(["CANCELLED"]);
  });

  test("the official client retries the 503 and gets the answer of a worker that came up", async () => {
    await using srv = await server();
    const call = openai(srv, 1).completions.create({ model: "m", prompt: "Say hi" });
    await pass(srv, WAIT);
    // The client retries by itself; this time a worker takes the job and answers.
    await parkedRequests(srv);
    const worker = protocolWorker(srv, "vllm", "w1");
    const job = await worker.take();
    expect(job.input).toEqual({ openai_route: "/v1/completions", openai_input: { model: "m", prompt: "Say hi" } });
    const answer: OpenAI.Completion = {
      id: "cmpl-1",
      object: "text_completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, text: "hi", logprobs: null, finish_reason: "stop" }],
    };
    await worker.done(job.id, { output: [answer] });
    expect(await call).toEqual(answer);
    expect(await statuses(srv)).toEqual(["COMPLETED", "CANCELLED"]);
  });

  test("a job a worker holds past the wait is 504 and cancelled, and the worker is told to stop", async () => {
    await using srv = await server();
    const call = failure(openai(srv, 0, "compat").chat.completions.create({ model: "m", messages }));
    await parkedRequests(srv);
    const worker = protocolWorker(srv, "vllm", "w1");
    const job = await worker.take();
    await pass(srv, WAIT);
    const err = await call;
    expect({ status: err.status, type: err.type, code: err.code }).toEqual({ status: 504, type: "server_error", code: "timeout" });
    expect(err.message).toContain("did not finish within 5 s");
    expect(await worker.stops()).toEqual([job.id]);
    expect(await statuses(srv)).toEqual(["CANCELLED"]);
  });

  test("a stream sends SSE comments while it waits for its first token, then an error event, and cancels", async () => {
    await using srv = await server();
    const res = fetch(`${srv.url}/v2/vllm/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${srv.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages, stream: true }),
    });
    // Within the first keep-alive interval nothing is sent: a quick failure can still be an HTTP error.
    await pass(srv, KEEPALIVE);
    const response = await res;
    expect({ status: response.status, type: response.headers.get("content-type") }).toEqual({
      status: 200,
      type: "text/event-stream; charset=utf-8",
    });
    const reader = response.body!.getReader();
    const seen = { text: "" };
    await readUntil(reader, seen, "\n\n");
    expect(seen.text).toBe(": waiting for the first token\n\n");
    for (let waited = KEEPALIVE; waited < WAIT; waited += KEEPALIVE) await pass(srv, KEEPALIVE);
    await readUntil(reader, seen, null);
    const [comments, events] = [
      seen.text.split("\n\n").filter((l) => l.startsWith(":")),
      seen.text.split("\n\n").filter((l) => l.startsWith("data: ")),
    ];
    expect(comments).toEqual(Array(WAIT / KEEPALIVE).fill(": waiting for the first token"));
    expect(events.map((e) => JSON.parse(e.slice(6)))).toEqual([
      {
        error: {
          message: expect.stringContaining("no worker took the request within 5 s"),
          type: "server_error",
          param: null,
          code: "no_worker",
        },
      },
    ]);
    expect(await statuses(srv)).toEqual(["CANCELLED"]);
  });

  test("the official client streams through the comments; a stream that waits past the limit throws", async () => {
    await using srv = await server();
    const stream = openai(srv).chat.completions.create({ model: "m", messages, stream: true });
    await pass(srv, KEEPALIVE);
    await pass(srv, KEEPALIVE);
    const worker = protocolWorker(srv, "vllm", "w1");
    const job = await worker.take();
    const chunk = (content: string) => ({
      id: "c1",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    });
    await worker.stream(job.id, chunk("Hel"));
    await worker.stream(job.id, chunk("lo"));
    await worker.done(job.id, {}, true);
    const got = [];
    for await (const c of await stream) got.push(c.choices[0]!.delta.content);
    expect(got).toEqual(["Hel", "lo"]);

    const lateStream = openai(srv).chat.completions.create({ model: "m", messages, stream: true });
    await pass(srv, KEEPALIVE);
    const reading = failure(
      (async () => {
        for await (const _ of await lateStream);
      })(),
    );
    for (let waited = KEEPALIVE; waited < WAIT; waited += KEEPALIVE) await pass(srv, KEEPALIVE);
    const late = await reading;
    expect(late).toBeInstanceOf(OpenAI.APIError);
    expect(late.message).toContain("no worker took the request within 5 s");
    expect(await statuses(srv)).toEqual(["CANCELLED", "COMPLETED"]);
  });

  test("a stream whose wait is no longer than the keep-alive interval fails with an HTTP 503", async () => {
    await using srv = await server({ openaiWaitMs: KEEPALIVE });
    const call = failure(openai(srv).chat.completions.create({ model: "m", messages, stream: true }));
    await pass(srv, KEEPALIVE);
    const err = await call;
    expect({ status: err.status, code: err.code }).toEqual({ status: 503, code: "no_worker" });
    expect(await statuses(srv)).toEqual(["CANCELLED"]);
  });

  test("without a known input schema, a body without messages or prompt is 400 in OpenAI's shape and queues nothing", async () => {
    await using srv = await server();
    const [code, body] = await srv.json("POST", "/v2/vllm/openai/v1/chat/completions", { model: "m" });
    expect({ code, body }).toEqual({
      code: 400,
      body: {
        error: {
          message: "Invalid parameter: messages: Invalid input: expected array, received undefined",
          type: "invalid_request_error",
          param: "messages",
          code: null,
        },
      },
    });
    const [code2, body2] = await srv.json("POST", "/v2/vllm/compat/v1/completions", { model: "m", stream: "yes", prompt: "x" });
    expect({ code: code2, param: body2.error.param }).toEqual({ code: 400, param: "stream" });
    expect((await srv.json("POST", "/v2/vllm/compat/v1/completions", { model: "m" }))[1].error.param).toBe("prompt");
    expect(await statuses(srv)).toEqual([]);
  });
});
