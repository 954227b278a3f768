import type { ContentfulStatusCode } from "hono/utils/http-status";
import { StoreUnavailableError } from "./store/store.ts";

/** The one error type routes throw; onError answers it as {"error": message} with its status. */
export class HttpError extends Error {
  override name = "HttpError";
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** `err` as the HttpError it is answered with, if it has one (a store that did not answer is a 503). */
export function asHttpError(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  if (err instanceof StoreUnavailableError) return new HttpError(503, `store unavailable: ${err.message}; retry later`, { "retry-after": "1" });
  return undefined;
}
