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
    guidance: z
      .number({ error: "must be a number" })
      .min(0, "must be at least 0.0")
      .max(10, "must be at most 10.0")
      .default(7.5),
    seed: z.number({ error: "must be an integer" }).int("must be an integer (-1 for a random seed)").default(-1),
    image_format: z.enum(["png", "jpeg"], { error: 'must be "png" or "jpeg"' }).default("jpeg"),
  });
}
export type ImageInput = z.output<ReturnType<typeof imageInput>>;
