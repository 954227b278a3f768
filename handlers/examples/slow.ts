import { z } from "zod";
import { defineHandler } from "../../sdk/index.ts";

/** Waits input.ms milliseconds, stopping early when its job is cancelled or times out. */
export default defineHandler({
  input: z.object({ ms: z.number().int().min(0).max(3_600_000) }),
  concurrency: 4,
  handler: (job, ctx) =>
    new Promise<{ waitedMs: number }>((resolve, reject) => {
      const started = Date.now();
      const timer = setTimeout(() => resolve({ waitedMs: Date.now() - started }), job.input.ms);
      ctx.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(ctx.signal.reason);
        },
        { once: true },
      );
    }),
});
