import type { JobRequest } from "../../protocol/job-request.ts";
import { HttpError } from "../http/http-error.ts";
import type { IdempotencyConflictError } from "../store/store.ts";

/** What identifies a request body for an Idempotency-Key: the SHA-256 of the request as read. */
export function bodyHash(request: JobRequest): string {
  return new Bun.CryptoHasher("sha256").update(JSON.stringify(request)).digest("hex");
}

/** The 422 a key reused with another body answers. */
export function idempotencyConflict(err: IdempotencyConflictError): HttpError {
  return new HttpError(422, `${err.message}: a retry must send the same body; a new request needs a new key`);
}
