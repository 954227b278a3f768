import { z } from "zod";
import { defineHandler } from "../../sdk/index.ts";

/** Returns its input unchanged. */
export default defineHandler({
  input: z.record(z.string(), z.unknown()),
  handler: async (job) => job.input,
});
