import type { z } from "zod";
import type { Config, EndpointConfig } from "../../config/config.ts";
import { describeIssues, type JobRequest } from "../../protocol/job-request.ts";
import { LIMITS } from "../../protocol/limits.ts";
import type { NewJob } from "../store/store.ts";
import { refusePrivateWebhook, type Resolver } from "./webhook-address.ts";
import { bodyHash } from "./idempotency.ts";
import { RefusedError } from "./refused.ts";

/** What a submission carries besides its request body. */
export interface SubmitOptions {
  keyId: string;
  /** runsync, status-sync and the OpenAI routes: the job is kept for the sync retention. */
  sync: boolean;
  /** Turns a failed input-schema check into the route's error (400 "Invalid parameter" by default). */
  invalid?: (error: z.ZodError) => Error;
  /** The request's Idempotency-Key header: while the same API key's key is kept, its job is answered instead. */
  idempotencyKey?: string;
  /** The origin the client called (http/request-input.ts requestOrigin): the job's file URLs are built on it. */
  origin?: string;
  /** A W3C traceparent: the request's header, then the submit span's (only while traces are on). */
  traceparent?: string;
}

/**
 * The checks a submission passes before it is queued, cheapest first: its input against the
 * handler's schema, its s3Config host, its webhook address; each refusal names the problem. A
 * promise only when there is a webhook to look up: a submission without one takes no extra turn.
 */
export function checkSubmission(
  config: Config,
  endpoint: EndpointConfig,
  schema: z.ZodType | undefined,
  request: JobRequest,
  options: SubmitOptions,
  resolver?: Resolver,
): Promise<void> | undefined {
  const checked = schema?.safeParse(request.input);
  if (checked && !checked.success) {
    throw options.invalid?.(checked.error) ?? new RefusedError("invalid", `Invalid parameter: ${describeIssues(checked.error)}`);
  }
  const s3Host = request.s3Config && new URL(request.s3Config.endpointUrl).host.toLowerCase();
  if (s3Host && endpoint.s3Hosts && !endpoint.s3Hosts.some((h) => h.toLowerCase() === s3Host)) {
    throw new RefusedError(
      "invalid",
      `invalid job request: s3Config.endpointUrl: host ${s3Host} is not one this endpoint allows (s3Hosts)`,
    );
  }
  if (request.webhook && config.server.webhookBlockPrivate)
    return refusePrivateWebhook(request.webhook, config.server.webhookAllow, resolver);
  return undefined;
}

/** The job to store for an accepted request, with the endpoint's defaults filled in; an Idempotency-Key is kept `idempotencyTtlMs`. */
export function newJobOf(
  id: string,
  endpointId: string,
  endpoint: EndpointConfig,
  request: JobRequest,
  options: SubmitOptions,
  idempotencyTtlMs: number,
): NewJob {
  const job: NewJob = {
    id,
    endpointId,
    input: request.input,
    webhook: request.webhook,
    policy: {
      executionTimeout: request.policy?.executionTimeout ?? endpoint.executionTimeout,
      lowPriority: request.policy?.lowPriority ?? false,
      ttl: request.policy?.ttl ?? LIMITS.ttlDefault,
    },
    s3Config: request.s3Config,
    sync: options.sync,
    keyId: options.keyId,
    origin: options.origin,
  };
  if (options.traceparent !== undefined) job.traceparent = options.traceparent;
  // Only when the header came: a submission without one costs nothing more.
  if (options.idempotencyKey !== undefined)
    job.idempotency = { key: options.idempotencyKey, bodyHash: bodyHash(request), ttlMs: idempotencyTtlMs };
  return job;
}
