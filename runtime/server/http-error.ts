import type { ContentfulStatusCode } from "hono/utils/http-status";

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
