import type { GenerationEnd, GenerationEvent } from "./engine.ts";

/** Growing batch sizes: min, min*growth, ... up to max (worker-vllm's 1, 3, 9, 27, 50, 50...). */
export interface BatchSizes {
  min: number;
  max: number;
  growth: number;
}

export interface TokenBatch {
  inputTokens: number;
  /** Text pieces of this batch, about one per token. */
  pieces: string[];
  /** Tokens generated in this batch / so far. */
  tokens: number;
  outputTokens: number;
  /** On the last batch only: how generation ended. */
  end?: GenerationEnd;
}

/**
 * Groups a generation's text into batches of growing token counts. A full batch goes out when
 * the next token arrives (one token later), so that the last batch is known to be the last
 * and carries `end`; a generation always gives at least one batch.
 */
export async function* tokenBatches(events: AsyncGenerator<GenerationEvent, GenerationEnd>, sizes: BatchSizes): AsyncGenerator<TokenBatch> {
  let size = Math.min(sizes.min, sizes.max);
  let inputTokens = 0;
  let outputTokens = 0;
  let batch: TokenBatch | undefined;
  let full: TokenBatch | undefined;
  try {
    for (;;) {
      const next = await events.next();
      if (next.done) {
        const last = full ?? batch ?? { inputTokens, pieces: [], tokens: 0, outputTokens };
        yield { ...last, end: next.value };
        return;
      }
      const event = next.value;
      if (event.type === "prompt") {
        inputTokens = event.inputTokens;
        continue;
      }
      if (full) {
        yield full;
        full = undefined;
      }
      outputTokens += event.tokens;
      batch ??= { inputTokens, pieces: [], tokens: 0, outputTokens };
      if (event.text) batch.pieces.push(event.text);
      batch.tokens += event.tokens;
      batch.outputTokens = outputTokens;
      if (batch.tokens >= size) {
        full = batch;
        batch = undefined;
        size = Math.min(sizes.max, Math.ceil(size * sizes.growth));
      }
    }
  } finally {
    // A consumer that stops early (a cancelled job) ends the generation and frees its sequence.
    await events.return(undefined as never);
  }
}
