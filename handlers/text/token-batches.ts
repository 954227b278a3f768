import { systemClock, type Clock } from "../../runtime/clock.ts";
import type { GenerationEnd, GenerationEvent } from "./engine.ts";

/**
 * Growing batch sizes: min, min*growth, ... up to max (worker-vllm's 1, 3, 9, 27, 50, 50...),
 * and how long a batch's first token may wait for the rest: a slow model's tokens go out by time
 * before the batch is full, a fast model's are still posted a batch at a time.
 */
export interface BatchSizes {
  min: number;
  max: number;
  growth: number;
  /** A batch goes out this long after its first token at the latest; unset: only when full. */
  flushMs?: number;
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

type Next = IteratorResult<GenerationEvent, GenerationEnd>;
const TIMED_OUT = Symbol("timed out");

/**
 * Groups a generation's text into batches of growing token counts. With `flushMs` (streams), a
 * batch goes out as soon as it is full, or `flushMs` after its first token if it is not, and
 * `end` may come in a last batch with no text. Without it, a full batch is held until the next
 * token arrives, so that the last batch is known to be the last and carries `end`. A generation
 * always gives at least one batch.
 */
export async function* tokenBatches(
  events: AsyncGenerator<GenerationEvent, GenerationEnd>,
  sizes: BatchSizes,
  clock: Clock = systemClock,
): AsyncGenerator<TokenBatch> {
  let size = Math.min(sizes.min, sizes.max);
  let inputTokens = 0;
  let outputTokens = 0;
  let batch: TokenBatch | undefined;
  let full: TokenBatch | undefined;
  /** When the first token of the batch filling arrived. */
  let heldSince = 0;
  let pending: Promise<Next> | undefined;
  try {
    for (;;) {
      pending ??= events.next();
      const held = full ?? batch;
      const next =
        held && sizes.flushMs !== undefined ? await within(pending, heldSince + sizes.flushMs - clock.now(), clock) : await pending;
      if (next === TIMED_OUT) {
        full = batch = undefined;
        yield held!;
        continue;
      }
      pending = undefined;
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
      if (!batch) {
        batch = { inputTokens, pieces: [], tokens: 0, outputTokens };
        heldSince = clock.now();
      }
      if (event.text) batch.pieces.push(event.text);
      batch.tokens += event.tokens;
      batch.outputTokens = outputTokens;
      if (batch.tokens >= size) {
        size = Math.min(sizes.max, Math.ceil(size * sizes.growth));
        if (sizes.flushMs !== undefined) yield batch;
        else full = batch;
        batch = undefined;
      }
    }
  } finally {
    // An event still awaited after a time flush: its failure has no one left to hear it.
    pending?.catch(() => {});
    // A consumer that stops early (a cancelled job) ends the generation and frees its sequence.
    await events.return(undefined as never);
  }
}

/** The next event, or TIMED_OUT when `ms` pass first (at once when `ms` is not positive). */
async function within(pending: Promise<Next>, ms: number, clock: Clock): Promise<Next | typeof TIMED_OUT> {
  if (ms <= 0) return TIMED_OUT;
  const timer = new AbortController();
  try {
    return await Promise.race([pending, clock.sleep(ms, timer.signal).then((): typeof TIMED_OUT => TIMED_OUT)]);
  } finally {
    timer.abort();
  }
}
