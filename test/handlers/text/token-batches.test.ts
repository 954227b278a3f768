import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import type { GenerationEnd, GenerationEvent } from "../../../handlers/text/engine.ts";
import { tokenBatches, type TokenBatch } from "../../../handlers/text/token-batches.ts";

/** A generation whose tokens arrive when the test says, as the engine's events do. */
function generation() {
  const queue: (GenerationEvent | GenerationEnd)[] = [];
  let wake: (() => void) | undefined;
  const push = (e: GenerationEvent | GenerationEnd) => {
    queue.push(e);
    wake?.();
  };
  async function* events(): AsyncGenerator<GenerationEvent, GenerationEnd> {
    for (;;) {
      while (!queue.length) await new Promise<void>((resolve) => (wake = resolve));
      const e = queue.shift()!;
      if (!("type" in e)) return e;
      yield e;
    }
  }
  return {
    events: events(),
    prompt: () => push({ type: "prompt", inputTokens: 4 }),
    token: (text: string) => push({ type: "text", text, tokens: 1 }),
    end: () => push({ inputTokens: 4, outputTokens: 0, finishReason: "stop" }),
    /** Events not yet read by the batcher. */
    unread: () => queue.length,
  };
}

const SIZES = { min: 1, max: 50, growth: 3, flushMs: 50 };
const texts = (b: TokenBatch) => b.pieces.join("");

describe("token batches", () => {
  test("a slow model's tokens go out by time: a full batch at once, no token more than flushMs after the first of its batch", async () => {
    const clock = new ManualClock();
    const gen = generation();
    const batches = tokenBatches(gen.events, SIZES, clock);
    gen.prompt();
    gen.token("a");
    // The first batch (one token) is full: it goes out without waiting for anything.
    expect(texts((await batches.next()).value as TokenBatch)).toBe("a");

    // The next batch holds up to 3 tokens: two arrive, and the batch waits 50 ms from the first.
    const second = batches.next();
    gen.token("b");
    await until(() => clock.sleeping === 1);
    clock.advance(30);
    gen.token("c");
    clock.advance(19);
    // Not yet due: the flush timer is still parked (it is gone once it fires).
    await until(() => clock.sleeping === 1);
    clock.advance(1);
    const b = (await second).value as TokenBatch;
    expect([texts(b), b.tokens, b.outputTokens, b.end]).toEqual(["bc", 2, 3, undefined]);

    // The generation ends with nothing held: the end comes alone.
    const last = batches.next();
    gen.end();
    expect((await last).value).toEqual({
      inputTokens: 4,
      pieces: [],
      tokens: 0,
      outputTokens: 3,
      end: { inputTokens: 4, outputTokens: 0, finishReason: "stop" },
    });
    expect((await batches.next()).done).toBe(true);
  });

  test("a fast model's tokens are still posted in growing batches; a last batch that is not full carries the end", async () => {
    const clock = new ManualClock();
    const gen = generation();
    gen.prompt();
    for (let i = 0; i < 100; i++) gen.token(String(i % 10));
    gen.end();
    const sizes: number[] = [];
    let end: GenerationEnd | undefined;
    for await (const b of tokenBatches(gen.events, SIZES, clock)) {
      sizes.push(b.tokens);
      end = b.end;
    }
    expect(sizes).toEqual([1, 3, 9, 27, 50, 10]);
    expect(end?.finishReason).toBe("stop");
  });

  test("without flushMs a batch waits until it is full, however long that takes, and a full one until the next token", async () => {
    const clock = new ManualClock();
    const gen = generation();
    const batches = tokenBatches(gen.events, { min: 3, max: 3, growth: 1 }, clock);
    gen.prompt();
    gen.token("a");
    gen.token("b");
    const next = batches.next();
    await until(() => gen.unread() === 0);
    clock.advance(60_000);
    gen.token("c");
    gen.token("d");
    expect(texts((await next).value as TokenBatch)).toBe("abc");
    await batches.return(undefined);
  });
});

/** Waits (by event-loop turns, never by time) until `done()` holds. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await Promise.resolve();
  expect(done()).toBe(true);
}
