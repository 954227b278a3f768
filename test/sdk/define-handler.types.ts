/**
 * Type-level tests of defineHandler, checked by `tsc --noEmit` (part of `npm test`). Each
 * @ts-expect-error must stay an error: tsc fails if the line it marks ever type-checks.
 */
import { z } from "zod";
import { defineHandler, type Handler, type HandlerContext } from "../../sdk/index.ts";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assert = <T extends true>(_: T) => {};

// The input type is inferred from the schema: no generics written.
defineHandler({
  input: z.object({ prompt: z.string(), steps: z.number().int().default(4), seed: z.number().optional() }),
  handler: async (job, ctx) => {
    assert<Equal<typeof job.input, { prompt: string; steps: number; seed?: number | undefined }>>(true);
    assert<Equal<typeof ctx, HandlerContext>>(true);
    const prompt: string = job.input.prompt;
    // @ts-expect-error steps is a number, not a string
    const wrong: string = job.input.steps;
    // @ts-expect-error no such field
    job.input.nope;
    return { prompt, wrong };
  },
});

// The schema's output type is what the handler sees (defaults and transforms applied).
defineHandler({
  input: z.object({ n: z.string().transform((s) => Number(s)) }),
  handler: (job) => {
    assert<Equal<typeof job.input.n, number>>(true);
    return job.input.n;
  },
});

// An async generator streams; its yields are the chunks.
const streaming = defineHandler({
  input: z.object({ text: z.string() }),
  returnAggregateStream: true,
  async *handler(job) {
    for (const w of job.input.text.split(" ")) yield w;
  },
});
assert<Equal<typeof streaming, Handler<z.ZodObject<{ text: z.ZodString }>, string, z.ZodUnknown>>>(true);

// Endpoint options are typed from their schema, in setup and in ctx.options.
defineHandler({
  input: z.object({}),
  options: z.object({ model: z.string(), device: z.enum(["cpu", "cuda"]).default("cpu") }),
  setup: (options) => {
    assert<Equal<typeof options, { model: string; device: "cpu" | "cuda" }>>(true);
  },
  handler: (_job, ctx) => {
    const device: "cpu" | "cuda" = ctx.options.device;
    // @ts-expect-error no such option
    ctx.options.nope;
    return device;
  },
});

// concurrency: a number or RunPod's modifier (current) => next.
defineHandler({ input: z.object({}), concurrency: 4, handler: () => 1 });
defineHandler({ input: z.object({}), concurrency: (current: number) => current + 1, handler: () => 1 });
// @ts-expect-error concurrency is not a string
defineHandler({ input: z.object({}), concurrency: "4", handler: () => 1 });

// The context's upload returns a URL string; progress and signal are typed.
defineHandler({
  input: z.object({}),
  handler: async (_job, ctx) => {
    const url: string = await ctx.upload("a.png", new Uint8Array([1]), "image/png");
    await ctx.progress({ percent: 10 });
    const aborted: boolean = ctx.signal.aborted;
    // @ts-expect-error upload needs data
    await ctx.upload("a.png");
    return { url, aborted };
  },
});

// @ts-expect-error a handler needs an input schema
defineHandler({ handler: () => 1 });
