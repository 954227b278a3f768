import { z } from "zod";

/** OpenAI's error body, used by every error of the OpenAI-compatible routes. */
export const openaiErrorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    /** The request field at fault, when one is. */
    param: z.string().nullable(),
    code: z.string().nullable(),
  }),
});
export type OpenaiErrorBody = z.infer<typeof openaiErrorSchema>;
