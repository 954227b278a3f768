import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { describeIssues } from "../protocol/job-request.ts";
import { HttpError } from "./http-error.ts";

/** Parses a request body as JSON whatever its content type (runpod-python posts form-encoded JSON). */
export async function readJson(req: Request): Promise<unknown> {
  const text = await req.text();
  if (!text.trim()) throw new HttpError(400, "request body is empty; expected JSON");
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, "request body is not valid JSON");
  }
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

/** Refuses a body over `maxBytes` with 413, reading no further than the limit. */
export function limitBody(maxBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new HttpError(413, `request body is larger than the limit of ${maxBytes} bytes`);
    },
  });
}
