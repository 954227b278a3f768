import type { MiddlewareHandler } from "hono";
import type { z } from "zod";
import { describeIssues, jobRequestSchema, type JobRequest } from "../../protocol/job-request.ts";
import { tracing } from "../../telemetry/tracing.ts";
import { HttpError } from "./http-error.ts";

/**
 * How deep arrays and objects may nest in a request body: deeper values cannot be stored (the
 * server's own JSON.stringify runs out of stack near 100,000 levels) and Python workers cannot
 * read them (json.loads stops near 1,000).
 */
export const MAX_JSON_DEPTH = 512;

/** Parses a request body as JSON whatever its content type (runpod-python posts form-encoded JSON). */
export async function readJson(req: Request): Promise<unknown> {
  const text = await req.text();
  if (!text.trim()) throw new HttpError(400, "request body is empty; expected JSON");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    if (err instanceof RangeError) throw tooDeep();
    throw new HttpError(400, "request body is not valid JSON");
  }
  // Nesting past the limit takes two characters a level: shorter bodies need no look.
  if (text.length > 2 * MAX_JSON_DEPTH && nestsDeeperThan(value, MAX_JSON_DEPTH)) throw tooDeep();
  return value;
}

const tooDeep = () => new HttpError(400, `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);

/** Whether arrays and objects in `value` nest deeper than `limit` (without recursion; about 0.7x JSON.parse's time on a body of small objects, nothing for long strings). */
function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop() as Record<string, unknown>;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    const children = Array.isArray(v) ? v : Object.values(v);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (typeof child === "object" && child !== null) {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** Validates with a zod schema, answering 400 with a message that names each bad field. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new HttpError(400, `invalid ${what}: ${describeIssues(result.error)}`);
  return result.data;
}

/** An optional integer query parameter within bounds; 400 naming the parameter otherwise. */
export function intQuery(value: string | undefined, name: string, min: number, max: number, fallback: number): number;
export function intQuery(value: string | undefined, name: string, min: number, max: number): number | undefined;
export function intQuery(value: string | undefined, name: string, min: number, max: number, fallback?: number) {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!/^-?\d+$/.test(value.trim()) || n < min || n > max) {
    throw new HttpError(400, `query parameter ${name} must be an integer from ${min} to ${max}, got "${value}"`);
  }
  return n;
}

/**
 * Whether a body of declared length is over `maxBytes` (413), judged by its Content-Length
 * alone (Bun reads no more than it); undefined when the length is not declared (chunked), which
 * only reading the body can tell.
 */
export function declaredTooLarge(headers: Headers, maxBytes: number): boolean | undefined {
  const length = headers.get("content-length");
  if (length === null || headers.has("transfer-encoding")) return undefined;
  return Number.parseInt(length, 10) > maxBytes;
}

/** The 413 of a body over `maxBytes`. */
export const tooLarge = (maxBytes: number) => new HttpError(413, `request body is larger than the limit of ${maxBytes} bytes`);

/** Refuses a body over `maxBytes` with 413, reading no further than the limit. */
export function limitBody(maxBytes: number): MiddlewareHandler {
  return async (c, next) => {
    // A body of declared length is judged by the header alone: reading it as a stream here would
    // make Request.body a stream, and a request's JSON is read much faster without one.
    const over = declaredTooLarge(c.req.raw.headers, maxBytes);
    if (over) throw tooLarge(maxBytes);
    if (over === undefined) c.req.raw = await limitStreamedBody(c.req.raw, maxBytes);
    await next();
  };
}

/**
 * A request whose body has no declared length, read up to `maxBytes` (413 past it) and given
 * back with the bytes it held.
 */
export async function limitStreamedBody(req: Request, maxBytes: number): Promise<Request> {
  if (!req.body) return req;
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const part of req.body as unknown as AsyncIterable<Uint8Array>) {
    size += part.length;
    if (size > maxBytes) throw tooLarge(maxBytes);
    parts.push(part);
  }
  return new Request(req, { body: Buffer.concat(parts, size) });
}

/** A /run or /runsync body, read and checked (400 naming the field). */
export async function readJobRequest(req: Request): Promise<JobRequest> {
  return validate(jobRequestSchema, await readJson(req), "job request");
}

/** The longest Idempotency-Key accepted. */
export const IDEMPOTENCY_KEY_MAX = 255;

/**
 * A request's Idempotency-Key header (the IETF draft's name): undefined when absent; 400 when
 * empty, too long or not printable ASCII. A key sent as a quoted string is taken without its quotes.
 */
export function idempotencyKey(headers: Headers): string | undefined {
  const raw = headers.get("idempotency-key");
  if (raw === null) return undefined;
  const key = /^"(.*)"$/.test(raw) ? raw.slice(1, -1) : raw;
  if (!key || key.length > IDEMPOTENCY_KEY_MAX || !/^[\x20-\x7e]+$/.test(key)) {
    throw new HttpError(400, `header Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX} printable ASCII characters`);
  }
  return key;
}

/**
 * `scheme://host[:port]` of a request's URL (which Bun builds from the Host header, and
 * AllowedHosts sets to a trusted proxy's forwarded origin), without parsing it.
 */
export function requestOrigin(url: string): string {
  const path = url.indexOf("/", url.indexOf("//") + 2);
  return path === -1 ? url : url.slice(0, path);
}

/**
 * The origin to record with a job submitted at `url`: none when it is the server's own (the one
 * its workers call), on which the job's file URLs are built anyway; a row is then no longer.
 */
export function originToRecord(url: string, local: { origin?: string } | undefined): string | undefined {
  const origin = requestOrigin(url);
  return origin === local?.origin ? undefined : origin;
}

/** The request's W3C traceparent header, read only while traces are on (a submission's parent span). */
export const traceparentOf = (headers: Headers): string | undefined => (tracing ? (headers.get("traceparent") ?? undefined) : undefined);
