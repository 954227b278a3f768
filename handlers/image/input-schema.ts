import { z } from "zod";
import { VARIANTS, type Variant } from "./options.ts";

const required = (type: string) => ({
  error: (issue: { input?: unknown }) => (issue.input === undefined ? "is required" : `must be ${type}`),
});

const side = z
  .number({ error: "must be an integer" })
  .int("must be an integer")
  .min(256, "must be at least 256")
  .max(1536, "must be at most 1536")
  .multipleOf(64, "must be divisible by 64")
  .default(1024);

/** The public image models' input (the spec's table); only num_inference_steps differs by variant. */
export function imageInput(variant: Variant) {
  const steps = VARIANTS[variant].steps;
  return z.object({
    prompt: z.string(required("a string")).min(1, "must not be empty"),
    negative_prompt: z.string({ error: "must be a string" }).optional(),
    width: side,
    height: side,
    num_inference_steps: z
      .number({ error: "must be an integer" })
      .int("must be an integer")
      .min(steps.min, `must be at least ${steps.min}`)
      .max(steps.max, `must be at most ${steps.max}`)
      .default(steps.default),
    // Unset means the model's own default (3.5 for FLUX.1-dev, see handler.ts): the spec's 7.5 is a
    // Stable Diffusion CFG scale, which as FLUX's guidance embedding over-saturates.
    guidance: z.number({ error: "must be a number" }).min(0, "must be at least 0.0").max(10, "must be at most 10.0").optional(),
    /** diffusers' true_cfg_scale: with negative_prompt, classifier-free guidance at this scale (1 = off). */
    true_cfg_scale: z.number({ error: "must be a number" }).min(1, "must be at least 1.0").max(10, "must be at most 10.0").optional(),
    seed: z.number({ error: "must be an integer" }).int("must be an integer (-1 for a random seed)").default(-1),
    image_format: z.enum(["png", "jpeg"], { error: 'must be "png" or "jpeg"' }).default("jpeg"),
  });
}
export type ImageInput = z.output<ReturnType<typeof imageInput>>;
