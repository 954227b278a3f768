import { defineHandler } from "../../sdk/index.ts";
import { loadOptional } from "../optional-packages.ts";
import { imageCost } from "./cost.ts";
import { imageInput } from "./input-schema.ts";
import { imageOptions, VARIANTS, type Variant } from "./options.ts";
import type { FluxPipeline } from "./pipeline.ts";

/** FLUX.1-dev's guidance embedding by default (diffusers' FluxPipeline guidance_scale); also what a fast endpoint gives a model that wants one. */
export const DEFAULT_GUIDANCE = 3.5;

/** The true-CFG scale a negative_prompt gets when the job sets none (diffusers' default of 1.0 would ignore it). */
export const DEFAULT_TRUE_CFG = 4;

/**
 * An image endpoint's handler. quality: dev-style, `guidance` is the guidance embedding (default
 * 3.5) and negative_prompt turns on true CFG at `true_cfg_scale` (default 4), as diffusers'
 * FluxPipeline keeps the two apart; fast: schnell-style, guidance and negative_prompt ignored. The model loads in
 * setup() (once per worker) and stays resident; the module itself imports nothing heavy, so the
 * server can read its input schema cheaply.
 */
export function createImageHandler(variant: Variant) {
  let pipeline: FluxPipeline | undefined;
  return defineHandler({
    input: imageInput(variant),
    options: imageOptions(variant),
    concurrency: 1,
    async setup(options) {
      const { loadImageModel } = await loadOptional("image", () => import("./load-model.ts"));
      pipeline = await loadImageModel(variant, options);
    },
    async handler(job, ctx) {
      if (!pipeline) throw new Error("the image model is not loaded (the worker's setup did not run)");
      const input = job.input;
      const seed = input.seed === -1 ? crypto.getRandomValues(new Uint32Array(1))[0]! : input.seed;
      const quality = VARIANTS[variant].guidance;
      const rgb = await pipeline.generate(
        {
          prompt: input.prompt,
          negativePrompt: quality ? input.negative_prompt : undefined,
          width: input.width,
          height: input.height,
          steps: input.num_inference_steps,
          guidance: (quality ? input.guidance : undefined) ?? DEFAULT_GUIDANCE,
          seed,
          trueCfgScale: quality ? (input.true_cfg_scale ?? DEFAULT_TRUE_CFG) : undefined,
        },
        {
          signal: ctx.signal,
          // progress is advisory: a failed post must not fail the image
          onStep: (step, steps) => ctx.progress({ step, steps }).catch(() => {}),
        },
      );
      const { encodeImage } = await loadOptional("image", () => import("./encode-image.ts"));
      const { bytes, contentType } = await encodeImage(rgb, input.width, input.height, input.image_format);
      const imageUrl = await ctx.upload(`image.${input.image_format === "png" ? "png" : "jpg"}`, bytes, contentType);
      ctx.log.info("image generated", { seed, width: input.width, height: input.height, steps: input.num_inference_steps });
      return { image_url: imageUrl, cost: imageCost(input.width, input.height, ctx.options.price) };
    },
  });
}

/** The handler type of an image endpoint. */
export type ImageHandler = ReturnType<typeof createImageHandler>;
