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

/**
 * An error `setup()` throws when the worker cannot start and trying again will not help (a model
 * path that does not exist, a device this machine lacks). The server then fails the endpoint's
 * queued jobs at once with this message, instead of retrying for startFailureWindowMs first. Any
 * error with `permanent = true` counts the same.
 *
 * @example
 * if (!existsSync(options.model)) throw new PermanentStartError(`model ${options.model} not found`);
 */
export class PermanentStartError extends Error {
  override name = "PermanentStartError";
  readonly permanent = true;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
  }
}
