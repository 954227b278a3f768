import type { HandlerContext } from "../../sdk/index.ts";
import type { ChatMessage, TextEngine } from "./engine.ts";
import { samplingFrom } from "./sampling.ts";
import type { ChatRequest, CompletionRequest, OpenaiInput } from "./text-input.ts";
import { textCost, type TextOptions } from "./text-options.ts";
import { tokenBatches } from "./token-batches.ts";

/** Streamed deltas grow like the legacy batches, so a long answer is a few dozen chunks. */
const SIZES = { min: 1, max: 50, growth: 3 };

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
const usage = (input: number, output: number): Usage => ({ prompt_tokens: input, completion_tokens: output, total_tokens: input + output });

function messagesOf(request: ChatRequest): ChatMessage[] {
  return request.messages.map((m) => ({
    role: m.role === "developer" ? "system" : m.role,
    content: typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text).join(""),
  }));
}

/**
 * A job that came through the OpenAI-compatible routes: yields OpenAI's response body (or, when
 * streamed, its chunks). The body, or the last chunk, also carries `cost`, which the server
 * charges and the route removes before answering.
 */
export async function* openaiJob(
  engine: TextEngine,
  input: OpenaiInput,
  options: TextOptions,
  modelName: string,
  jobId: string,
  ctx: HandlerContext,
): AsyncGenerator<Record<string, unknown>> {
  const created = Math.floor(Date.now() / 1000);
  if (input.openai_route === "/v1/models") {
    yield { object: "list", data: [{ id: modelName, object: "model", created, owned_by: "spool" }] };
    return;
  }
  const chat = input.openai_route === "/v1/chat/completions";
  const request: ChatRequest | CompletionRequest = input.openai_input;
  const maxTokens = (chat ? (request as ChatRequest).max_completion_tokens : undefined) ?? request.max_tokens;
  const events = engine.generate({
    input: chat ? { messages: messagesOf(request as ChatRequest) } : { prompt: [(request as CompletionRequest).prompt].flat()[0]! },
    ...samplingFrom({ ...request, max_tokens: maxTokens }, options.defaultMaxTokens),
    signal: ctx.signal,
  });
  const head = {
    id: `${chat ? "chatcmpl" : "cmpl"}-${jobId}`,
    object: chat ? "chat.completion" : "text_completion",
    created,
    model: modelName,
  };

  if (!request.stream) {
    let text = "";
    for await (const batch of tokenBatches(events, { min: Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, growth: 1 })) {
      text += batch.pieces.join("");
      if (!batch.end) continue;
      const choice = chat
        ? { index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: batch.end.finishReason }
        : { index: 0, text, logprobs: null, finish_reason: batch.end.finishReason };
      yield {
        ...head,
        choices: [choice],
        usage: usage(batch.inputTokens, batch.outputTokens),
        cost: textCost(options, batch.inputTokens, batch.outputTokens),
      };
    }
    return;
  }

  const includeUsage = request.stream_options?.include_usage === true;
  const chunkHead = { ...head, object: chat ? "chat.completion.chunk" : "text_completion", ...(includeUsage ? { usage: null } : {}) };
  const choice = (text: string | undefined, finish: string | null, role = false) =>
    chat
      ? {
          index: 0,
          delta: { ...(role ? { role: "assistant" } : {}), ...(text !== undefined ? { content: text } : {}) },
          logprobs: null,
          finish_reason: finish,
        }
      : { index: 0, text: text ?? "", logprobs: null, finish_reason: finish };
  let first = true;
  for await (const batch of tokenBatches(events, { ...SIZES, flushMs: options.streamFlushMs })) {
    const text = batch.pieces.join("");
    if (text || first) yield { ...chunkHead, choices: [choice(text, null, first)] };
    first = false;
    if (!batch.end) continue;
    const cost = textCost(options, batch.inputTokens, batch.outputTokens);
    const finish = { ...chunkHead, choices: [choice(chat ? undefined : "", batch.end.finishReason)] };
    if (!includeUsage) {
      yield { ...finish, cost };
      continue;
    }
    yield finish;
    yield { ...chunkHead, choices: [], usage: usage(batch.inputTokens, batch.outputTokens), cost };
  }
}
