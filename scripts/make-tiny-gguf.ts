#!/usr/bin/env bun
/**
 * Writes the tiny demo GGUF (llama architecture, 2 layers, n_embd 64, byte-level BPE vocabulary
 * of 266 tokens, random weights) for trying the text endpoint without real weights. It
 * generates readable babble, not language:
 *
 *   bun scripts/make-tiny-gguf.ts FILE [--seed N] [--context-length N]
 *
 * Then point an endpoint at it: `[endpoints.text.options] model = "FILE"`. (With no model set at
 * all, the text handler writes this same file under the data dir on first use.)
 */
import { parseArgs } from "node:util";
import { writeTinyGguf } from "../handlers/text/tiny-gguf.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  options: { seed: { type: "string", default: "1" }, "context-length": { type: "string", default: "2048" } },
  allowPositionals: true,
});
const file = positionals[0];
const seed = Number(values.seed);
const contextLength = Number(values["context-length"]);
if (!file || !Number.isSafeInteger(seed) || !Number.isInteger(contextLength) || contextLength < 16) {
  console.error("usage: bun scripts/make-tiny-gguf.ts FILE [--seed N] [--context-length N]");
  process.exit(2);
}
const started = performance.now();
writeTinyGguf(file, { seed, contextLength });
console.log(`tiny GGUF (seed ${seed}) written to ${file} in ${(performance.now() - started).toFixed(1)} ms`);
