#!/usr/bin/env bun
/**
 * Writes a tiny FLUX-style pipeline with random weights in the diffusers ONNX layout, for
 * trying the image endpoints without real weights (its images are noise):
 *
 *   bun scripts/make-tiny-flux.ts DIR [--variant dev|schnell] [--seed N]
 *
 * Then point an endpoint at it: `[endpoints.image-quality.options] model = "DIR"`.
 */
import { parseArgs } from "node:util";
import { makeTinyFlux } from "../handlers/image/tiny-model/make-tiny-flux.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  options: { variant: { type: "string", default: "dev" }, seed: { type: "string", default: "1" } },
  allowPositionals: true,
});
const dir = positionals[0];
const variant = values.variant;
const seed = Number(values.seed);
if (!dir || (variant !== "dev" && variant !== "schnell") || !Number.isSafeInteger(seed)) {
  console.error("usage: bun scripts/make-tiny-flux.ts DIR [--variant dev|schnell] [--seed N]");
  process.exit(2);
}
const started = performance.now();
await makeTinyFlux(dir, { variant, seed });
console.log(`tiny FLUX (${variant}, seed ${seed}) written to ${dir} in ${((performance.now() - started) / 1000).toFixed(2)} s`);
