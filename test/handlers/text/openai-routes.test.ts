import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ManualClock } from "../../../runtime/clock.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";
import { startTextServer, TEXT_HANDLER, type TextServer } from "./text-server.ts";

let t: TextServer;
let client: OpenAI;
beforeAll(async () => {
  t = await startTextServer();
  client = new OpenAI({ apiKey: t.srv.key, baseURL: `${t.srv.url}/v2/text/openai/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t?.[Symbol.asyncDispose]();
});

/** The error a client call fails with (the client's APIPromise is a thenable, not a Promise). */
async function failure(call: PromiseLike<unknown>): Promise<any> {
  return call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (err: unknown) => err,
  );
}

const messages = [
  { role: "system" as const, content: "You are terse." },
  { role: "user" as const, content: "Name a colour." },
];

describe("the official openai client", () => {
  test("chat.completions.create without streaming", async () => {
    const res = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 9, seed: 1 });
    expect(res).toEqual({
      id: expect.stringMatching(/^chatcmpl-sync-/),
      object: "chat.completion",
      created: expect.any(Number),
      model: "tiny",
      choices: [
        { index: 0, message: { role: "assistant", content: expect.any(String), refusal: null }, logprobs: null, finish_reason: "length" },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 9, total_tokens: res.usage!.prompt_tokens + 9 },
    });
    // The job's cost was charged to the key, though the body does not show it.
    expect((await t.srv.store.usage())[0]!.cost).toBeGreaterThan(0);
  });

  test("chat.completions.create streaming with stream_options.include_usage", async () => {
    const stream = await client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 20,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) expect(c).toMatchObject({ id: chunks[0]!.id, object: "chat.completion.chunk", model: "tiny" });
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text.length).toBeGreaterThan(0);
    expect(chunks.at(-2)!.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: "length" }]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: expect.any(Number), completion_tokens: 20, total_tokens: last.usage!.prompt_tokens + 20 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.some((c) => "cost" in c)).toBe(false);
  });

  test("streaming without include_usage has no usage chunk", async () => {
    const stream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 5, stream: true });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("length");
    expect(chunks.every((c) => c.usage === undefined)).toBe(true);
  });

  test("completions.create and models.list, also under /compat/v1", async () => {
    const compat = new OpenAI({ apiKey: t.srv.key, baseURL: `${t.srv.url}/v2/text/compat/v1`, maxRetries: 0 });
    const res = await compat.completions.create({ model: "tiny", prompt: "The sky is", max_tokens: 6 });
    expect(res).toEqual({
      id: expect.stringMatching(/^cmpl-/),
      object: "text_completion",
      created: expect.any(Number),
      model: "tiny",
      choices: [{ index: 0, text: expect.any(String), logprobs: null, finish_reason: "length" }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 6, total_tokens: expect.any(Number) },
    });
    const models = [];
    for await (const m of compat.models.list()) models.push(m);
    expect(models).toEqual([{ id: "tiny", object: "model", created: expect.any(Number), owned_by: "spool" }]);
  });

  test("a client that goes away mid-stream cancels its job", async () => {
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "tiny", messages, max_tokens: 480, stream: true },
      { signal: abort.signal },
    );
    for await (const _chunk of stream) {
      abort.abort();
      break;
    }
    const [, page] = await t.srv.json("GET", "/v2/text/requests?limit=1");
    const id = page.requests[0].id;
    const job = await until(async () => {
      const j = await t.srv.store.get("text", id, Date.now());
      return j?.status !== "IN_PROGRESS" && j;
    }, "the job to end");
    expect(job.status).toBe("CANCELLED");
    await until(() => t.text.engine()!.stats.running === 0, "the sequence to be freed");
  });

  test("requests travel through the queue as {openai_route, openai_input} jobs", async () => {
    await client.chat.completions.create({ model: "tiny", messages, max_tokens: 2 });
    const [, page] = await t.srv.json("GET", "/v2/text/requests?limit=1");
    const job = await t.srv.store.get("text", page.requests[0].id, Date.now());
    expect(job!.input).toEqual({ openai_route: "/v1/chat/completions", openai_input: { model: "tiny", messages, max_tokens: 2 } });
    expect(job!.keyId).toBeString();
  });
});

describe("errors in OpenAI's shape", () => {
  test("invalid requests are 400 at submission, naming the parameter", async () => {
    const res = await t.srv.call("POST", "/v2/text/openai/v1/chat/completions", { model: "tiny", messages: [] });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: "Invalid parameter: messages: Too small: expected array to have >=1 items",
        type: "invalid_request_error",
        param: "messages",
        code: null,
      },
    });
    const bad = await failure(
      client.chat.completions.create({ model: "tiny", messages: [{ role: "wizard" as never, content: "hi" }], max_tokens: 0 }),
    );
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ status: 400, param: "max_tokens", type: "invalid_request_error" });
    expect(bad.message).toContain("messages.0.role: Invalid option");
    expect((await t.srv.call("POST", "/v2/text/openai/v1/chat/completions", "not json")).status).toBe(400);
  });

  test("a wrong key is 401, an unknown endpoint or route 404", async () => {
    const wrong = new OpenAI({ apiKey: "nope", baseURL: `${t.srv.url}/v2/text/openai/v1`, maxRetries: 0 });
    expect(await failure(wrong.models.list())).toMatchObject({ status: 401, type: "authentication_error", code: "invalid_api_key" });
    const res = await t.srv.call("GET", "/v2/nowhere/openai/v1/models");
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error).toEqual({
      message: "endpoint nowhere not found",
      type: "invalid_request_error",
      param: null,
      code: "not_found",
    });
    const route = await t.srv.json("POST", "/v2/text/openai/v1/embeddings", {});
    expect(route[0]).toBe(404);
    expect(route[1].error.type).toBe("invalid_request_error");
  });

  test("a job that fails is an error response, not a hung request", async () => {
    // The prompt is longer than the context (512 tokens): the handler fails the job as invalid.
    const long = "word ".repeat(400);
    expect(await failure(client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: long }] }))).toMatchObject({
      status: 400,
      message: expect.stringContaining("this model's context holds 512"),
    });
  });

  test("an endpoint whose handler takes no OpenAI input has no such interface", async () => {
    await using srv = await startTestServer({
      server: { scaleIntervalMs: 3_600_000 },
      endpoints: { words: { handler: TEXT_HANDLER.replace("text/handler.ts", "examples/stream.ts"), workersMax: 0 } },
    });
    const [code, body] = await srv.json("GET", "/v2/words/openai/v1/models");
    expect(code).toBe(404);
    expect(body.error.message).toContain("does not serve the OpenAI-compatible interface");
  });

  test("/compat counts against the endpoint's openai rate limit; 429 in OpenAI's shape", async () => {
    // A clock that never moves: all three requests fall in one window however slow the machine.
    await using srv = await startTestServer({
      clock: new ManualClock(),
      server: { scaleIntervalMs: 3_600_000 },
      endpoints: { text: { handler: TEXT_HANDLER, workersMax: 0, rateLimits: { openai: { requests: 2 } } } },
    });
    expect((await srv.json("POST", "/v2/text/openai/v1/chat/completions", {}))[0]).toBe(400);
    expect((await srv.json("POST", "/v2/text/compat/v1/chat/completions", {}))[0]).toBe(400);
    const [code, body] = await srv.json("POST", "/v2/text/compat/v1/chat/completions", {});
    expect(code).toBe(429);
    expect(body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
  });
});

describe("rate limits on streams", () => {
  test("an SSE stream holds its concurrent slot until it ends", async () => {
    // The worker is driven by hand, so the stream stays open exactly as long as the test wants.
    const { protocolWorker } = await import("../../helpers/protocol-worker.ts");
    await using srv = await startTestServer({
      server: { takeWaitMs: 30_000, streamWaitMs: 30_000 },
      endpoints: { text: { handler: TEXT_HANDLER, workersMax: 0, rateLimits: { openai: { requests: 1000, concurrent: 1 } } } },
    });
    const base = `${srv.url}/v2/text/openai/v1`;
    const headers = { authorization: `Bearer ${srv.key}`, "content-type": "application/json" };
    const w = protocolWorker(srv, "text", "w1");
    const take = w.take();
    const res = fetch(`${base}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    const job = await take;
    await w.stream(job.id, { id: "c1", object: "chat.completion.chunk", choices: [] });
    const reader = (await res).body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"id":"c1"');

    const busy = await fetch(`${base}/models`, { headers });
    expect(busy.status).toBe(429);
    expect(((await busy.json()) as { error: { message: string } }).error.message).toContain("concurrent");

    await w.done(job.id, { output: [] }, true);
    while (!(await reader.read()).done);
    // The stream has ended: its slot is free for the next request (itself a job, answered here).
    const next = fetch(`${base}/models`, { headers });
    const models = await w.take();
    await w.done(models.id, { output: { object: "list", data: [] } });
    expect((await next).status).toBe(200);
  });
});
