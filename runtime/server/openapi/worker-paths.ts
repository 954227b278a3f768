import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import {
  fileUploadResponseSchema,
  jobDoneSchema,
  jobStopResponseSchema,
  jobStreamSchema,
  takenJobSchema,
} from "../../protocol/worker-wire.ts";
import { jobLogPostAnswerSchema, jobLogPostSchema } from "../../protocol/job-log.ts";
import { component, emptyObject, endpointParam, errors, json, jsonBody, KEY_AUTH } from "./openapi-common.ts";

const TAG = "Worker protocol";

/** The worker protocol of runpod-python: take, done, stream, ping, stop, file uploads. */
export function registerWorkerPaths(registry: OpenAPIRegistry, endpointIds: string[]): void {
  const endpoint_id = endpointParam(endpointIds);
  const worker_id = z.string().describe("The worker's own id (RUNPOD_POD_ID)");
  const job_id = z.string().describe("A job the worker took");
  const workerParams = z.object({ endpoint_id, worker_id });
  const jobParams = z.object({ endpoint_id, worker_id, job_id });
  const TakenJob = component(registry, "TakenJob", takenJobSchema, "output");
  const base = { tags: [TAG], security: KEY_AUTH };
  const noJob = { 204: { description: "Nothing within the long-poll (takeWaitMs)" } };
  const ack = json("Recorded (idempotent: a repeated or late post is also 200)", emptyObject);

  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/job-take/{worker_id}",
    operationId: "jobTake",
    summary: "Take the next job (long-poll)",
    request: { params: workerParams },
    responses: { 200: json("A job, now IN_PROGRESS on this worker", TakenJob), ...noJob, ...errors([401, 404]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/job-take-batch/{worker_id}",
    operationId: "jobTakeBatch",
    summary: "Take up to batch_size jobs (long-poll)",
    request: {
      params: workerParams,
      query: z.object({ batch_size: z.number().int().min(1).max(64).optional().describe("At most this many (default 1)") }),
    },
    responses: {
      200: json("Jobs, now IN_PROGRESS on this worker", { type: "array", items: TakenJob }),
      ...noJob,
      ...errors([400, 401, 404]),
    },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/job-done/{worker_id}/{job_id}",
    operationId: "jobDone",
    summary: "Post a job's result, or progress with status IN_PROGRESS",
    description: "The body is read as JSON whatever its content type (runpod-python sends form-urlencoded).",
    request: {
      params: jobParams,
      query: z.object({ isStream: z.enum(["true", "false"]).optional().describe("true: the output was streamed already") }),
      body: jsonBody(component(registry, "JobDone", jobDoneSchema, "input")),
    },
    responses: { 200: ack, ...errors([400, 401, 404, 413]) },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/job-stream/{worker_id}/{job_id}",
    operationId: "jobStream",
    summary: "Post one stream chunk",
    request: { params: jobParams, body: jsonBody(component(registry, "JobStreamChunk", jobStreamSchema, "input")) },
    responses: { 200: ack, ...errors([400, 401, 404, 413]) },
  });
  registry.registerPath({
    ...base,
    method: "post",
    path: "/v2/{endpoint_id}/job-log/{worker_id}/{job_id}",
    operationId: "jobLog",
    summary: "Post log lines of a running job (Spool's workers; not part of RunPod's protocol)",
    description: "Kept up to server.logMaxBytes per job; `truncated` says the log is full and no more lines are kept.",
    request: { params: jobParams, body: jsonBody(component(registry, "JobLogPost", jobLogPostSchema, "input")) },
    responses: {
      200: json("Taken", component(registry, "JobLogPostAnswer", jobLogPostAnswerSchema, "output")),
      ...errors([400, 401, 404, 413]),
    },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/ping/{worker_id}",
    operationId: "ping",
    summary: "Heartbeat, with the jobs the worker is running",
    request: {
      params: workerParams,
      query: z.object({
        job_id: z.string().optional().describe("Comma-separated ids of the jobs running now"),
        status: z.string().optional().describe("`unhealthy` marks the worker unhealthy"),
        check: z.string().optional(),
        reason: z.string().optional(),
      }),
    },
    responses: { 200: json("Recorded", emptyObject), ...errors([401, 404]) },
  });
  registry.registerPath({
    ...base,
    method: "get",
    path: "/v2/{endpoint_id}/job-stop/{worker_id}",
    operationId: "jobStop",
    summary: "Jobs the worker must stop (long-poll)",
    request: { params: workerParams },
    responses: {
      200: json("Stop these", component(registry, "JobStop", jobStopResponseSchema, "output")),
      204: { description: "Nothing to stop" },
      ...errors([401, 404]),
    },
  });
  registry.registerPath({
    ...base,
    method: "put",
    path: "/v2/{endpoint_id}/job-files/{worker_id}/{job_id}/{name}",
    operationId: "jobFileUpload",
    summary: "Store a file of a running job; answers its signed URL",
    request: {
      params: z.object({ endpoint_id, worker_id, job_id, name: z.string().describe("File name") }),
      body: {
        required: true,
        content: { "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } } },
      },
    },
    responses: { 200: json("Stored", fileUploadResponseSchema), ...errors([400, 401, 404, 413]) },
  });
}
