import type { OpenAPIRegistry, ResponseConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { errorResponseSchema } from "../../protocol/job-response.ts";
import { openaiErrorSchema } from "../../protocol/openai-wire.ts";

/** A JSON Schema object in the document. */
export type SchemaObject = Record<string, unknown>;

/**
 * A zod schema as JSON Schema (2020-12, OpenAPI 3.1's dialect), written by zod itself: the
 * request side (`input`) for bodies, the answer side (`output`) for responses.
 */
export function jsonSchema(schema: z.ZodType, io: "input" | "output"): SchemaObject {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as SchemaObject;
  return rest;
}

/** Names a protocol schema as a component; returns the reference to it. */
export function component(registry: OpenAPIRegistry, name: string, schema: z.ZodType, io: "input" | "output"): SchemaObject {
  registry.registerComponent("schemas", name, jsonSchema(schema, io) as never);
  return { $ref: `#/components/schemas/${name}` };
}

/** Either auth header form: `Authorization: Bearer KEY` or the bare key (runpod-python). */
export const KEY_AUTH: Record<string, string[]>[] = [{ bearer: [] }, { bareKey: [] }];

/** Registers what every path refers to: the auth schemes and the two error shapes. */
export function registerCommon(registry: OpenAPIRegistry): void {
  registry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    description: "An API key (spool keys create) as `Authorization: Bearer KEY`.",
  });
  registry.registerComponent("securitySchemes", "bareKey", {
    type: "apiKey",
    in: "header",
    name: "Authorization",
    description: "The same key without `Bearer ` (as runpod-python workers send it).",
  });
  component(registry, "Error", errorResponseSchema, "output");
  component(registry, "OpenAIError", openaiErrorSchema, "output");
}

/** The path parameter naming an endpoint; an enum of the configured ones when there are any. */
export function endpointParam(endpointIds: string[]) {
  const [first, ...rest] = endpointIds;
  const id = first === undefined ? z.string() : z.enum([first, ...rest]);
  return id.describe("An endpoint of this server's configuration");
}

/** A JSON answer with `schema`. */
export const json = (description: string, schema: z.ZodType | SchemaObject): ResponseConfig => ({
  description,
  content: { "application/json": { schema: schema instanceof z.ZodType ? jsonSchema(schema, "output") : schema } },
});

/** A required JSON request body. */
export const jsonBody = (schema: SchemaObject) => ({ required: true, content: { "application/json": { schema } } });

/** The errors a job API route may answer, as {"error": "..."}. */
export function errors(statuses: number[], openai = false): Record<string, ResponseConfig> {
  const what: Record<number, string> = {
    400: "Bad input: the message names the field",
    401: "Missing, unknown or revoked key, or a key not allowed here",
    403: "Invalid or expired file URL",
    404: "Unknown endpoint or job (or job gone: purged or expired)",
    409: "Idempotency-Key kept for a job that is no longer: it is not run again",
    413: "Body over the route's limit",
    422: "Idempotency-Key already used with another request body",
    429: "Rate limit or queue full (backpressure); see Retry-After",
    500: "Unexpected failure (with a request id) or, on OpenAI routes, a job that failed",
    503: "No worker of the endpoint can start (the reason in the message; see Retry-After), or the store does not answer",
    504: "The job ran past its execution timeout",
  };
  const out: Record<string, ResponseConfig> = {};
  const ref = { $ref: `#/components/schemas/${openai ? "OpenAIError" : "Error"}` };
  for (const s of statuses) out[String(s)] = json(what[s] ?? "Error", ref);
  return out;
}

/** An empty JSON object: the acknowledgement of worker posts. */
export const emptyObject = z.object({});
