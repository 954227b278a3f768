import { z } from "zod";

export type Variant = "quality" | "fast";
export type Device = "cuda" | "webgpu" | "cpu";

/** Per-variant defaults: the spec's prices (US dollars per megapixel) and step ranges. */
export const VARIANTS = {
  quality: { price: 0.02, steps: { min: 1, max: 50, default: 28 }, tiny: "dev", t5Length: 512, guidance: true },
  fast: { price: 0.0024, steps: { min: 1, max: 8, default: 4 }, tiny: "schnell", t5Length: 256, guidance: false },
} as const;

/** `[endpoints.<id>.options]` of an image endpoint. */
export function imageOptions(variant: Variant) {
  return z.object({
    /**
     * A local folder with a diffusers-style ONNX export, or a Hugging Face hub id (downloaded
     * once into cacheDir). Unset: a tiny demo model with random weights, generated under the
     * data dir on first use (it draws noise).
     */
    model: z.string().min(1).optional(),
    /** Execution provider; one that is not available stops the worker at startup. @default "cpu" */
    device: z.enum(["cuda", "webgpu", "cpu"]).default("cpu"),
    /** US dollars per megapixel of output. @default 0.02 (quality), 0.0024 (fast) */
    price: z.number().nonnegative().default(VARIANTS[variant].price),
    /** T5 tokens the prompt is padded or cut to. @default 512 (quality), 256 (fast) */
    maxSequenceLength: z.number().int().min(1).max(512).default(VARIANTS[variant].t5Length),
    /** Where hub downloads and the demo model are kept. @default "<data dir>/models" */
    cacheDir: z.string().optional(),
    /** The server's data dir (workers get SPOOL_DATA_DIR). @default ".data" */
    dataDir: z.string().default(process.env.SPOOL_DATA_DIR ?? ".data"),
  });
}
export type ImageOptions = z.output<ReturnType<typeof imageOptions>>;
