export { defineHandler, isHandler } from "./define-handler.ts";
export { HandlerError, PermanentStartError } from "./errors.ts";
export type {
  Concurrency,
  Handler,
  HandlerContext,
  HandlerFunction,
  HandlerJob,
  HandlerLog,
  HandlerOptions,
  JobPolicy,
} from "./define-handler.ts";
