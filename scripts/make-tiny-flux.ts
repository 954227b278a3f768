#!/usr/bin/env bun
/**
 * Writes a tiny FLUX-style pipeline with random weights in the diffusers ONNX layout, for
 * trying the image endpoints without real weights (its images are noise):
 *
 *   bun scripts/make-tiny-flux.ts DIR [--variant dev|schnell] [--seed N] [--precision fp32|fp16]
 *                                     [--io fp32|fp16] [--layout diffusers|optimum|community]
 *
 * --precision fp16 stores weights and computes in fp16 (inputs and outputs fp16 too unless --io
 * fp32, like ONNX Runtime's fp16 optimizer with keep_io_types). --layout optimum: weights in
 * model.onnx_data, CLIP tokenizer as vocab.json + merges.txt only; community: unet/ and
 * model.onnx.data. Then point an endpoint at it: `[endpoints.image-quality.options] model = "DIR"`.
 */
import { parseArgs } from "node:util";
import { makeTinyFlux, type TinyFluxOptions } from "../handlers/image/tiny-model/make-tiny-flux.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    variant: { type: "string", default: "dev" },
    seed: { type: "string", default: "1" },
    precision: { type: "string", default: "fp32" },
    io: { type: "string" },
    layout: { type: "string", default: "diffusers" },
  },
  allowPositionals: true,
});
const LAYOUTS: Record<string, TinyFluxOptions> = {
  diffusers: {},
  optimum: { externalData: "model.onnx_data", clipTokenizer: "vocab-merges" },
  community: { transformerFolder: "unet", externalData: "model.onnx.data" },
};
const dir = positionals[0];
const { variant, precision, io, layout } = values;
const seed = Number(values.seed);
const isPrecision = (p: string | undefined): p is "fp32" | "fp16" => p === "fp32" || p === "fp16";
if (
  !dir ||
  (variant !== "dev" && variant !== "schnell") ||
  !Number.isSafeInteger(seed) ||
  !isPrecision(precision) ||
  (io !== undefined && !isPrecision(io)) ||
  !(layout in LAYOUTS)
) {
  console.error(
    "usage: bun scripts/make-tiny-flux.ts DIR [--variant dev|schnell] [--seed N] [--precision fp32|fp16] [--io fp32|fp16] [--layout diffusers|optimum|community]",
  );
  process.exit(2);
}
const started = performance.now();
await makeTinyFlux(dir, { variant, seed, precision, io, ...LAYOUTS[layout] });
console.log(
  `tiny FLUX (${variant}, ${precision}, ${layout} layout, seed ${seed}) written to ${dir} in ${((performance.now() - started) / 1000).toFixed(2)} s`,
);
