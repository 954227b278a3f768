/**
 * An error a handler throws on purpose to fail its job with a clear message. The job ends FAILED
 * with this message and `type` as its error type.
 *
 * @example
 * throw new HandlerError("image too large", { type: "InputTooLarge" });
 */
export class HandlerError extends Error {
  override name = "HandlerError";
  readonly type: string;
  constructor(message: string, options: { type?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.type = options.type ?? "HandlerError";
  }
}
