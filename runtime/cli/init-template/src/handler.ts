import { z } from "zod";
import { defineHandler } from "spool/sdk";

/**
 * Greets someone, streaming the greeting word by word. A job's output (`/runsync`, `/status`) is
 * the list of words; `/stream` gives each word as it is yielded.
 */
export default defineHandler({
  input: z.object({
    name: z.string().min(1),
    greeting: z.string().default("Hello"),
  }),
  returnAggregateStream: true,
  async *handler(job, ctx) {
    for (const word of `${job.input.greeting}, ${job.input.name}!`.split(" ")) {
      if (ctx.signal.aborted) return;
      yield { word };
    }
  },
});
