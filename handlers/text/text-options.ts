import { z } from "zod";

/**
 * Settings of a text endpoint (`[endpoints.<id>.options]` in the config). Every one is optional:
 * with none, the endpoint serves the generated tiny demo model on the CPU, free of charge.
 */
export const textOptionsSchema = z.strictObject({
  /**
   * The GGUF model: a local path, or a hub id downloaded once into `modelsDir` ("hf:owner/repo/
   * file.gguf", "hf:owner/repo:Q4_K_M", or an https URL). Unset: a tiny demo model with random
   * weights, generated under the data dir on first use (it babbles).
   */
  model: z.string().min(1).optional(),
  /** The model's name in /v1/models and in responses; the file name without .gguf when unset. */
  modelName: z.string().min(1).optional(),
  /** Where hub downloads and the demo model are kept; `<data dir>/models` when unset. */
  modelsDir: z.string().min(1).optional(),
  /** Where llama.cpp runs; a device this machine cannot use stops the worker at startup. @default "cpu" */
  device: z.enum(["cpu", "cuda", "vulkan"]).default("cpu"),
  /** Jobs a worker runs at once, as sequences of one context (evaluated in shared batches). @default 4 */
  sequences: z.number().int().min(1).max(64).default(4),
  /** Tokens each sequence holds: prompt and completion together. @default 2048 */
  contextSize: z.number().int().min(64).max(1_048_576).default(2048),
  /** CPU threads for llama.cpp; 0 picks one less than the cores (at least 1). @default 0 */
  threads: z.number().int().min(0).max(1024).default(0),
  /**
   * A streamed answer's tokens go out in batches that grow with the answer (1, 3, 9, 27, 50...),
   * and a batch goes out this long after its first token at the latest, full or not: the most a
   * token waits, whatever the model's speed. @default 50
   */
  streamFlushMs: z.number().int().min(0).max(10_000).default(50),
  /**
   * Holds each generated token this long after the one before: the demo model then stands for a
   * slower real model (20 tokens/s is 50). Benchmarks use it. @default 0
   */
  tokenDelayMs: z.number().min(0).max(10_000).default(0),
  /** max_tokens of a request that sets none. @default 256 */
  defaultMaxTokens: z.number().int().min(1).default(256),
  /** US dollars per million prompt tokens, reported in each job's cost. @default 0 */
  inputPricePerMillion: z.number().min(0).default(0),
  /** US dollars per million generated tokens. @default 0 */
  outputPricePerMillion: z.number().min(0).default(0),
});
export type TextOptions = z.output<typeof textOptionsSchema>;

/** A job's price in US dollars, rounded up after the 10th decimal (the spec's rule). */
export function textCost(
  options: Pick<TextOptions, "inputPricePerMillion" | "outputPricePerMillion">,
  input: number,
  output: number,
): number {
  const exact = (input * options.inputPricePerMillion + output * options.outputPricePerMillion) / 1_000_000;
  // The small epsilon keeps binary noise (0.1 + 0.2) from rounding a whole step up.
  return Math.ceil(exact * 1e10 - 1e-6) / 1e10;
}
