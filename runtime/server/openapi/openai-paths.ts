import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { chatCompletionRequestSchema, completionRequestSchema } from "../../protocol/openai-request.ts";
import type { JsonSchema } from "./endpoint-inputs.ts";
import { component, endpointParam, errors, KEY_AUTH } from "./openapi-common.ts";

const TAG = "OpenAI-compatible";
const FREE_FORM: JsonSchema = { type: "object", additionalProperties: true };

const OPERATIONS = [
  { method: "post", suffix: "chat/completions", name: "ChatCompletions", summary: "Chat completion (JSON, or SSE with stream: true)" },
  { method: "post", suffix: "completions", name: "Completions", summary: "Text completion (JSON, or SSE with stream: true)" },
  { method: "get", suffix: "models", name: "Models", summary: "The model this endpoint serves" },
] as const satisfies ReadonlyArray<{ method: "get" | "post"; suffix: string; name: string; summary: string }>;

/** Two prefixes of the same interface: /openai/v1 and /compat/v1. */
const INTERFACES = ["openai", "compat"] as const;

function operation(
  path: string,
  op: (typeof OPERATIONS)[number],
  operationId: string,
  body: JsonSchema | null,
  params: RouteConfig["request"],
): RouteConfig {
  return {
    tags: [TAG],
    security: KEY_AUTH,
    method: op.method,
    path,
    operationId,
    summary: op.summary,
    description: "Each request is a job in the endpoint's queue; errors use OpenAI's error body.",
    request: {
      ...params,
      ...(body ? { body: { required: true, content: { "application/json": { schema: body } } } } : {}),
    },
    responses: {
      200: {
        description: "The handler's answer (OpenAI's shape); server-sent events ending with `data: [DONE]` when streaming",
        content: { "application/json": { schema: FREE_FORM }, "text/event-stream": { schema: { type: "string" } } },
      },
      ...errors([400, 401, 404, 413, 429, 500, 504], true),
    },
  };
}

/**
 * The OpenAI-compatible routes of any endpoint, under both prefixes. Bodies are the least every
 * endpoint checks (runtime/protocol/openai-request.ts); they go on to the endpoint's handler as
 * openai_input, which may check more (400 naming the field).
 */
export function registerOpenaiPaths(registry: OpenAPIRegistry, endpointIds: string[]): void {
  const endpoint_id = endpointParam(endpointIds);
  const bodies: Record<string, JsonSchema | null> = {
    ChatCompletions: component(registry, "ChatCompletionRequest", chatCompletionRequestSchema, "input"),
    Completions: component(registry, "CompletionRequest", completionRequestSchema, "input"),
    Models: null,
  };
  for (const iface of INTERFACES) {
    for (const op of OPERATIONS) {
      const params = { params: z.object({ endpoint_id }) };
      registry.registerPath(
        operation(`/v2/{endpoint_id}/${iface}/v1/${op.suffix}`, op, `${iface}${op.name}`, bodies[op.name] ?? null, params),
      );
    }
  }
}
