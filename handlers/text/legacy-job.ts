import type { HandlerContext } from "../../sdk/index.ts";
import type { EngineMetrics } from "./engine-stats.ts";
import type { TextEngine } from "./engine.ts";
import { samplingFrom } from "./sampling.ts";
import type { LegacyInput } from "./text-input.ts";
import { textCost, type TextOptions } from "./text-options.ts";
import { tokenBatches } from "./token-batches.ts";

/** Output of a non-streamed job: the one element of its output array. */
export interface TextResult {
  choices: { tokens: string[] }[];
  cost: number;
  usage: { input: number; output: number };
}

/** One streamed chunk (the spec's stream response); the last one also carries the job's cost. */
export interface TextChunk {
  output: { input_tokens: number; output_tokens: number; text: string[] };
  metrics: EngineMetrics & { input_tokens: number; output_tokens: number; scenario: "stream" | "batch"; stream_index: number };
  cost?: number;
}

/**
 * A job in worker-vllm's input form. Not streamed: one result with the whole text. Streamed:
 * chunks of growing token batches with the engine's metrics, while /status shows the text so far.
 */
export async function* legacyJob(
  engine: TextEngine,
  input: LegacyInput,
  options: TextOptions,
  ctx: HandlerContext,
): AsyncGenerator<TextResult | TextChunk> {
  const events = engine.generate({
    input: input.messages ? { messages: input.messages } : { prompt: input.prompt! },
    ...samplingFrom(input.sampling_params, options.defaultMaxTokens),
    signal: ctx.signal,
  });
  const sizes = input.stream
    ? { min: input.min_batch_size, max: input.max_batch_size, growth: input.batch_size_growth_factor, flushMs: options.streamFlushMs }
    : { min: Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, growth: 1 };
  const text: string[] = [];
  let index = 0;
  for await (const batch of tokenBatches(events, sizes)) {
    text.push(...batch.pieces);
    const cost = batch.end ? textCost(options, batch.inputTokens, batch.outputTokens) : undefined;
    if (!input.stream) {
      yield { choices: [{ tokens: [text.join("")] }], cost: cost!, usage: { input: batch.inputTokens, output: batch.outputTokens } };
      continue;
    }
    const counts = { input_tokens: batch.inputTokens, output_tokens: batch.outputTokens };
    yield {
      output: { ...counts, text: batch.pieces },
      metrics: { ...engine.metrics(), ...counts, scenario: "stream", stream_index: index++ },
      ...(cost === undefined ? {} : { cost }),
    };
    if (!batch.end) await ctx.progress({ ...counts, text });
  }
}
