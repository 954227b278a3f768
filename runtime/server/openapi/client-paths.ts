import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { jobRequestSchema } from "../../protocol/job-request.ts";
import {
  healthResponseSchema,
  jobResponseSchema,
  jobStateSchema,
  jobStatusSchema,
  purgeResponseSchema,
  requestsPageSchema,
  streamResponseSchema,
} from "../../protocol/job-response.ts";
import { LIMITS } from "../../protocol/limits.ts";
import { scalingSignalSchema } from "../../protocol/scaling-signal.ts";
import { jobLogsResponseSchema } from "../../protocol/job-log.ts";
import { component, endpointParam, errors, json, jsonBody, KEY_AUTH } from "./openapi-common.ts";

const TAG = "Jobs";

/** The /v2/{endpoint_id} client API (RunPod's job API): run, runsync, status, stream, cancel, retry, purge, health, scaling, requests. */
export function registerClientPaths(registry: OpenAPIRegistry, endpointIds: string[]): void {
  const endpoint_id = endpointParam(endpointIds);
  const jobParams = z.object({ endpoint_id, id: z.string().describe("A job id from /run or /runsync") });
  const JobRequest = component(registry, "JobRequest", jobRequestSchema, "input");
  const JobResponse = component(registry, "JobResponse", jobResponseSchema, "output");
  const JobState = component(registry, "JobState", jobStateSchema, "output");
  const wait = (min: number, what: string) =>
    z.object({
      wait: z.number().int().min(min).max(LIMITS.runsyncWaitMax).optional().describe(`${what} (ms, default ${LIMITS.runsyncWaitDefault})`),
    });
  const base = { tags: [TAG], security: KEY_AUTH };
  const idempotency = z.object({
    "idempotency-key": z
      .string()
      .min(1)
      .max(255)
      .optional()
      .describe(
        "A retry with the same key and body (keys in any order) answers the job the first request made (same id) instead of queueing another, for server.idempotencyTtlMs (24 h); 409 once that job is gone",
      ),
  });

  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/run",
    operationId: "run",
    summary: "Queue a job",
    request: { params: z.object({ endpoint_id }), headers: idempotency, body: jsonBody(JobRequest) },
    responses: { 200: json("Queued", JobState), ...errors([400, 401, 404, 409, 413, 422, 429, 503]) },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/runsync",
    operationId: "runsync",
    summary: "Queue a job and wait for it",
    description: "Answers the job response once the job is final, or {id, status} when it is not within `wait`. Ids start with `sync-`.",
    request: {
      params: z.object({ endpoint_id }),
      query: wait(LIMITS.runsyncWaitMin, "How long to wait"),
      headers: idempotency,
      body: jsonBody(JobRequest),
    },
    responses: { 200: json("Final, or still running after `wait`", JobResponse), ...errors([400, 401, 404, 409, 413, 422, 429, 503]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/status/{id}",
    operationId: "status",
    summary: "A job's status and result",
    description:
      "An IN_QUEUE job also carries `queuePosition` (0: next to be taken). With `Accept: text/event-stream` the state is streamed as server-sent events until final.",
    request: {
      params: jobParams,
      query: z.object({
        ttl: z.number().int().min(LIMITS.ttlMin).max(LIMITS.ttlMax).optional().describe("Reset how long the job lives, from now (ms)"),
      }),
    },
    responses: { 200: json("The job", JobResponse), ...errors([400, 401, 404, 429]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/status-sync/{id}",
    operationId: "statusSync",
    summary: "A job's status, waiting for a final state",
    request: { params: jobParams, query: wait(0, "How long to wait for a final state") },
    responses: { 200: json("The job, final or as it is after `wait`", JobResponse), ...errors([400, 401, 404, 429]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/stream/{id}",
    operationId: "stream",
    summary: "Stream chunks not returned yet",
    description: "Waits briefly for something new. With `Accept: text/event-stream`, chunks are pushed as server-sent events.",
    request: { params: jobParams },
    responses: {
      200: json("New chunks and the job's status", component(registry, "StreamResponse", streamResponseSchema, "output")),
      ...errors([401, 404, 429]),
    },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/logs/{id}",
    operationId: "logs",
    summary: "The lines the job's handler printed and logged",
    description:
      "Oldest first, from line `since` on (0 by default): ask again with `since` = the lines read so far to continue. Kept with the job, at most server.logMaxBytes each. With `Accept: text/event-stream` on /status or /stream, each line is also pushed as an `event: log`. Workers of runpod-python send none.",
    request: {
      params: jobParams,
      query: z.object({ since: z.number().int().min(0).optional().describe("Index of the first line to answer") }),
    },
    responses: {
      200: json("The job's log lines", component(registry, "JobLogs", jobLogsResponseSchema, "output")),
      ...errors([400, 401, 404]),
    },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/cancel/{id}",
    operationId: "cancel",
    summary: "Cancel a queued or running job",
    request: { params: jobParams },
    responses: { 200: json("The job's state after the cancel", JobState), ...errors([401, 404, 429]) },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/retry/{id}",
    operationId: "retry",
    summary: "Queue a FAILED or TIMED_OUT job again",
    request: { params: jobParams },
    responses: { 200: json("Queued again, same id", JobState), ...errors([400, 401, 404]) },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/purge-queue",
    operationId: "purgeQueue",
    summary: "Remove every queued job of the endpoint",
    request: { params: z.object({ endpoint_id }) },
    responses: {
      200: json("How many were removed", component(registry, "PurgeResponse", purgeResponseSchema, "output")),
      ...errors([401, 404, 429]),
    },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/health",
    operationId: "health",
    summary: "Job counts and workers of the endpoint",
    request: { params: z.object({ endpoint_id }) },
    responses: { 200: json("Counts", component(registry, "HealthResponse", healthResponseSchema, "output")), ...errors([401, 404]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/scaling",
    operationId: "scaling",
    summary: "Queue figures and the worker count the scale rule wants (KEDA's metrics-api scaler)",
    request: { params: z.object({ endpoint_id }) },
    responses: { 200: json("Scaling signal", component(registry, "ScalingSignal", scalingSignalSchema, "output")), ...errors([401, 404]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/requests",
    operationId: "requests",
    summary: "Recent jobs of the endpoint, newest first",
    request: {
      params: z.object({ endpoint_id }),
      query: z.object({
        limit: z.number().int().min(1).max(100).optional().describe("Page size (default 20)"),
        cursor: z.string().optional().describe("nextCursor of the previous page"),
        status: jobStatusSchema.optional().describe("Only jobs in this state"),
      }),
    },
    responses: { 200: json("A page", component(registry, "RequestsPage", requestsPageSchema, "output")), ...errors([400, 401, 404, 429]) },
  });

  registry.registerWebhook({
    method: "post",
    path: "jobEnded",
    summary: "A job submitted with `webhook` ended",
    description:
      "POSTed to the job's webhook URL when it ends, signed with Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature). A non-200 answer is retried 2 more times.",
    request: { body: jsonBody(JobResponse) },
    responses: { 200: { description: "Received; anything else is retried" } },
  });
}
