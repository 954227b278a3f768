import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { describeIssues } from "../protocol/job-request.ts";
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
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) throw tooDeep();
  return value;
}

const tooDeep = () => new HttpError(400, `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);

/** Whether arrays and objects in `value` nest deeper than `limit` (without recursion). */
function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  const stack: Array<[object, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (depth > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
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

/** Refuses a body over `maxBytes` with 413, reading no further than the limit. */
export function limitBody(maxBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new HttpError(413, `request body is larger than the limit of ${maxBytes} bytes`);
    },
  });
}
