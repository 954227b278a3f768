import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import type { Config } from "../../config/config.ts";
import { LIMITS } from "../../protocol/limits.ts";
import type { InputSchemas } from "../jobs/input-schemas.ts";
import { registerClientPaths } from "./client-paths.ts";
import { endpointInputs, inputComponent, type EndpointInput } from "./endpoint-inputs.ts";
import { errors, json, KEY_AUTH, registerCommon } from "./openapi-common.ts";
import { registerOpenaiPaths } from "./openai-paths.ts";
import { registerWorkerPaths } from "./worker-paths.ts";
import { jobResponseSchema, jobStateSchema } from "../../protocol/job-response.ts";

const FREE_FORM = {
  type: "object",
  additionalProperties: true,
  description: "The server cannot read this endpoint's handler: any JSON object",
} as const;

/** /v2/<endpoint>/run and /runsync for each configured endpoint, with its handler's own input schema. */
function registerEndpointPaths(registry: OpenAPIRegistry, inputs: EndpointInput[]): void {
  for (const ep of inputs) {
    const name = inputComponent(ep.endpointId);
    registry.registerComponent("schemas", name, ep.input ?? FREE_FORM);
    const body = {
      required: true,
      content: {
        "application/json": {
          schema: {
            allOf: [
              { $ref: "#/components/schemas/JobRequest" },
              { type: "object" as const, required: ["input"], properties: { input: { $ref: `#/components/schemas/${name}` } } },
            ],
          },
        },
      },
    };
    const tags = [`Endpoint ${ep.endpointId}`];
    registry.registerPath({
      tags,
      security: KEY_AUTH,
      method: "post",
      path: `/v2/${ep.endpointId}/run`,
      operationId: `run_${ep.endpointId}`,
      summary: `Queue a job on ${ep.endpointId}`,
      request: { body },
      responses: { 200: json("Queued", jobStateSchema), ...errors([400, 401, 413, 429]) },
    });
    registry.registerPath({
      tags,
      security: KEY_AUTH,
      method: "post",
      path: `/v2/${ep.endpointId}/runsync`,
      operationId: `runsync_${ep.endpointId}`,
      summary: `Queue a job on ${ep.endpointId} and wait for it`,
      request: { query: z.object({ wait: z.number().int().min(LIMITS.runsyncWaitMin).max(LIMITS.runsyncWaitMax).optional() }), body },
      responses: { 200: json("Final, or still running after `wait`", jobResponseSchema), ...errors([400, 401, 413, 429]) },
    });
  }
}

/** /metrics and the signed file downloads. */
function registerOperationsPaths(registry: OpenAPIRegistry): void {
  registry.registerPath({
    tags: ["Operations"],
    security: [...KEY_AUTH, {}],
    method: "get",
    path: "/metrics",
    operationId: "metrics",
    summary: "Prometheus metrics (text exposition format)",
    description: "Needs a full or read-only key not limited to some endpoints, unless server.metricsPublic is set.",
    responses: { 200: { description: "Metrics", content: { "text/plain": { schema: { type: "string" } } } }, ...errors([401]) },
  });
  registry.registerPath({
    tags: ["Operations"],
    security: [],
    method: "get",
    path: "/files/{endpoint_id}/{job_id}/{name}",
    operationId: "fileDownload",
    summary: "A file a worker uploaded for a job, at the signed URL it was given",
    request: {
      params: z.object({ endpoint_id: z.string(), job_id: z.string(), name: z.string() }),
      query: z.object({ expires: z.string(), sig: z.string() }),
    },
    responses: {
      200: {
        description: "The file",
        content: { "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } } },
      },
      ...errors([403]),
    },
  });
}

/**
 * The OpenAPI 3.1 document of this server, generated from the zod schemas the routes validate
 * and answer with (runtime/protocol) and from each endpoint handler's input schema.
 */
export async function buildOpenApiDocument(config: Config, inputSchemas: InputSchemas | undefined): Promise<Record<string, unknown>> {
  const inputs = await endpointInputs(config, inputSchemas);
  const endpointIds = inputs.map((i) => i.endpointId);
  const registry = new OpenAPIRegistry();
  registerCommon(registry);
  registerClientPaths(registry, endpointIds);
  registerWorkerPaths(registry, endpointIds);
  registerOpenaiPaths(registry, endpointIds);
  registerEndpointPaths(registry, inputs);
  registerOperationsPaths(registry);
  const doc = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Spool",
      version: "1",
      description:
        'A RunPod-compatible queue for inference jobs: RunPod\'s job API and worker protocol, and an OpenAI-compatible interface per endpoint. Send the API key as `Authorization: Bearer KEY` or as the bare key. Errors are `{"error": "..."}` (OpenAI\'s error body on the OpenAI routes).',
    },
    tags: [
      { name: "Jobs", description: "RunPod's job API, per endpoint" },
      { name: "Worker protocol", description: "What runpod-python workers and Spool workers speak" },
      { name: "OpenAI-compatible", description: "/openai/v1 (and /compat/v1) of endpoints whose handler takes OpenAI input" },
      ...endpointIds.map((id) => ({ name: `Endpoint ${id}`, description: `Jobs of ${id}, with its handler's input schema` })),
      { name: "Operations" },
    ],
  });
  return doc as unknown as Record<string, unknown>;
}
