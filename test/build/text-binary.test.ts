import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { bareCopy, buildHandler, flags, ROOT, runpodEnv } from "./built-binary.ts";

// One build for the whole file: builds are slow.
const TEXT_HANDLER = join(ROOT, "handlers/text/handler.ts");
const built = buildHandler(TEXT_HANDLER);
afterAll(() => built[Symbol.dispose]());

const messages = [{ role: "user" as const, content: "Name a colour." }];

/** A chat job through the job API and an OpenAI-compatible stream, both answered by the running binary. */
async function chatAndStream(srv: TestServer): Promise<string> {
  const [code, body] = await srv.json("POST", "/v2/text/runsync?wait=120000", {
    input: { messages, sampling_params: { max_tokens: 8, seed: 1 } },
  });
  expect(code).toBe(200);
  expect(body).toMatchObject({ status: "COMPLETED", output: [{ choices: [{ tokens: [expect.any(String)] }], usage: { output: 8 } }] });

  const client = new OpenAI({ apiKey: srv.key, baseURL: `${srv.url}/v2/text/openai/v1`, maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: "tiny",
    messages,
    max_tokens: 12,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
  expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("").length).toBeGreaterThan(0);
  expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 12 });
  return body.workerId;
}

describe("the text binary", () => {
  test("the build embeds node-llama-cpp's CPU binaries and the files it reads", () => {
    expect(built.output).toMatch(/embedded @node-llama-cpp\/linux-x64\/bins\/linux-x64\/ \(\d+ files, [\d.]+ MB\)/);
    expect(built.output).toContain("embedded node-llama-cpp/ (1 file,"); // its package.json
    expect(built.output).not.toContain("linux-x64-cuda");
    expect(built.output).not.toContain("linux-x64-vulkan");
  });

  test("alone in an empty dir under env -i: a chat job and an OpenAI stream, with flags and with RunPod's env contract", async () => {
    using bare = bareCopy(built.binary);
    await using srv = await startTestServer({
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 0, scaleIntervalMs: 3_600_000 },
      endpoints: { text: { handler: TEXT_HANDLER, workersMax: 0, rateLimits: { requests: { requests: 1_000_000 } } } },
    });
    {
      await using _worker = bare.start(flags(srv, "text"));
      await chatAndStream(srv);
    }
    const entries = bare.cacheEntries();
    expect(entries).toHaveLength(1);
    {
      await using _worker = bare.start([], runpodEnv(srv, "text", "pod-text"));
      expect(await chatAndStream(srv)).toBe("pod-text");
    }
    expect(bare.cacheEntries()).toEqual(entries); // the second start reused the first one's extraction
  }, 120_000);

  test("a binary asked for a GPU it was not built with stops at startup with the reason", async () => {
    using bare = bareCopy(built.binary);
    const run = bare.start(["--input", JSON.stringify({ prompt: "x" })], { SPOOL_HANDLER_OPTIONS: JSON.stringify({ device: "cuda" }) });
    await using _ = run;
    expect(await run.proc.exited).not.toBe(0);
    expect(run.lines.join("\n")).toContain('text handler: device "cuda" is not available on this machine');
  }, 60_000);
});
