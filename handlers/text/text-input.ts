import { z } from "zod";

const positiveInt = z.number().int().min(1);
const stop = z.union([z.string(), z.array(z.string()).max(16)]);

/** vLLM's sampling parameters that the text handler honours; other ones are accepted and ignored. */
const samplingParams = z.looseObject({
  max_tokens: positiveInt.optional(),
  /** 0 is greedy. */
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  /** -1 or 0: no top-k. */
  top_k: z.number().int().min(-1).optional(),
  stop: stop.optional(),
  seed: z.number().int().optional(),
});

const legacyMessage = z.object({ role: z.enum(["system", "user", "assistant"]), content: z.string() });

/** The job input of worker-vllm: messages or prompt, sampling_params, stream (wire-compat.md). */
export const legacyInputSchema = z
  .looseObject({
    messages: z.array(legacyMessage).min(1).optional(),
    prompt: z.string().optional(),
    sampling_params: samplingParams.default({}),
    stream: z.boolean().default(false),
    /** Streamed tokens come in batches growing from min to max by this factor (worker-vllm's names). */
    min_batch_size: positiveInt.max(1000).default(1),
    max_batch_size: positiveInt.max(1000).default(50),
    batch_size_growth_factor: z.number().min(1).max(100).default(3),
  })
  .superRefine((v, ctx) => {
    if ((v.messages === undefined) === (v.prompt === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: ["messages"],
        message: "give either messages (a list of {role, content}) or prompt (a string)",
      });
    }
  });
export type LegacyInput = z.output<typeof legacyInputSchema>;

const contentPart = z.object({ type: z.literal("text"), text: z.string() });
const chatMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant"]),
  content: z.union([z.string(), z.array(contentPart)]).nullable(),
});

/** Fields of OpenAI's chat and completion requests that the handler honours; others are ignored. */
const commonRequest = {
  model: z.string().optional(),
  max_tokens: positiveInt.nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  top_k: z.number().int().min(-1).nullable().optional(),
  stop: stop.nullable().optional(),
  seed: z.number().int().nullable().optional(),
  n: z.literal(1, { error: "only n = 1 is supported" }).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullable().optional(),
};

export const chatRequestSchema = z.looseObject({
  ...commonRequest,
  messages: z.array(chatMessage).min(1),
  max_completion_tokens: positiveInt.nullable().optional(),
});
export type ChatRequest = z.output<typeof chatRequestSchema>;

export const completionRequestSchema = z.looseObject({
  ...commonRequest,
  prompt: z.union([z.string(), z.array(z.string()).length(1, "only one prompt per request is supported")]),
});
export type CompletionRequest = z.output<typeof completionRequestSchema>;

/** OpenAI routes reach the handler as {openai_route, openai_input} (worker-vllm's convention). */
export const openaiInputSchema = z.discriminatedUnion(
  "openai_route",
  [
    z.object({ openai_route: z.literal("/v1/chat/completions"), openai_input: chatRequestSchema }),
    z.object({ openai_route: z.literal("/v1/completions"), openai_input: completionRequestSchema }),
    z.object({ openai_route: z.literal("/v1/models"), openai_input: z.unknown().optional() }),
  ],
  { error: "must be /v1/chat/completions, /v1/completions or /v1/models" },
);
export type OpenaiInput = z.output<typeof openaiInputSchema>;

export type TextInput = LegacyInput | OpenaiInput;

/**
 * The text handler's job input: the OpenAI form when `openai_route` is present, else the
 * legacy form. Issues name the field (`sampling_params.max_tokens`, `openai_input.messages`).
 */
export const textInputSchema = z
  .looseObject({})
  // The checks below cannot be written as JSON Schema; an example shows a person (the dashboard's playground) what to send.
  .meta({
    description: "worker-vllm's input: messages (a list of {role, content}) or prompt, sampling_params, stream",
    examples: [
      {
        messages: [{ role: "user", content: "Write a haiku about queues." }],
        sampling_params: { max_tokens: 64, temperature: 0.7 },
        stream: true,
      },
    ],
  })
  .transform((value, ctx): TextInput => {
    const schema = "openai_route" in value ? openaiInputSchema : legacyInputSchema;
    const result = schema.safeParse(value);
    if (result.success) return result.data;
    for (const issue of result.error.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
    return z.NEVER;
  });

export const isOpenaiInput = (input: TextInput): input is OpenaiInput => "openai_route" in input && input.openai_route !== undefined;
