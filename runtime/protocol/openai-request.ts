import { z } from "zod";

// The least an OpenAI-compatible request must carry for any worker to serve it. Endpoints whose
// handler the server can import check the full request with the handler's own schema; these
// only stop what no worker could answer (worker-vllm and the like) before it is queued.

const stream = z.boolean().nullish();

/** POST chat/completions: a non-empty list of messages, each with a role. */
export const chatCompletionRequestSchema = z.looseObject({
  messages: z.array(z.looseObject({ role: z.string() })).min(1),
  stream,
});

/** POST completions: a prompt as text, texts, token ids, or lists of token ids. */
export const completionRequestSchema = z.looseObject({
  prompt: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))]),
  stream,
});
