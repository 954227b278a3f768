import { z } from "zod";
import { defineHandler } from "../../sdk/index.ts";

/** Yields the words of input.text one by one; the list of words is also the output. */
export default defineHandler({
  input: z.object({ text: z.string() }),
  returnAggregateStream: true,
  async *handler(job, ctx) {
    for (const word of job.input.text.split(/\s+/).filter(Boolean)) {
      if (ctx.signal.aborted) return;
      yield word;
    }
  },
});
