import { expect, test } from "bun:test";
import { MAX_JSON_DEPTH } from "../../runtime/server/http/request-input.ts";
import { startTestServer } from "../helpers/test-server.ts";

// JSON bodies nested past what can be stored or read by a Python worker are a 400 that queues
// nothing, on every route that reads one; 100,000 levels used to be a 500.

/** `{"input": ...}` whose arrays and objects nest `depth` levels in all. */
const nested = (depth: number) => `{"input": ${'{"a":'.repeat(depth - 2)}${"[".repeat(1)}1${"]".repeat(1)}${"}".repeat(depth - 2)}}`;

test(`bodies nesting past ${MAX_JSON_DEPTH} levels are 400 and change nothing; ${MAX_JSON_DEPTH} levels are accepted`, async () => {
  await using srv = await startTestServer({ endpoints: { vllm: {}, echo: { rateLimits: { requests: { requests: 1_000_000 } } } } });
  const refusal = { error: `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` };
  for (const depth of [MAX_JSON_DEPTH + 1, 10_000, 100_000]) {
    for (const path of ["/v2/vllm/run", "/v2/vllm/runsync", "/v2/echo/job-done/w1/x", "/v2/echo/job-stream/w1/x"]) {
      expect({ depth, path, answer: await srv.json("POST", path, nested(depth)) }).toEqual({ depth, path, answer: [400, refusal] });
    }
    const [code, body] = await srv.json(
      "POST",
      "/v2/vllm/openai/v1/chat/completions",
      `{"messages": [{"role": "user", "content": ${"[".repeat(depth)}${"]".repeat(depth)}}]}`,
    );
    expect({ depth, code, body }).toEqual({
      depth,
      code: 400,
      body: { error: { message: refusal.error, type: "invalid_request_error", param: null, code: null } },
    });
  }
  expect((await srv.json("GET", "/v2/vllm/requests"))[1]).toEqual({ requests: [] });

  const [code, queued] = await srv.json("POST", "/v2/vllm/run", nested(MAX_JSON_DEPTH));
  expect({ code, status: queued.status }).toEqual({ code: 200, status: "IN_QUEUE" });
  const taken = await srv.call("GET", "/v2/vllm/job-take/w1");
  expect(JSON.stringify(((await taken.json()) as { input: unknown }).input)).toBe(JSON.stringify(JSON.parse(nested(MAX_JSON_DEPTH)).input));
});
