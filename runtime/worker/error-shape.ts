import { hostname } from "node:os";
import { HandlerError } from "../../sdk/errors.ts";

/**
 * A thrown error in RunPod's shape: the JSON text of {error_type, error_message,
 * error_traceback, hostname, worker_id, runpod_version}, which /status shows as given.
 */
export function errorShape(err: unknown, workerId: string): string {
  const e = err instanceof Error ? err : new Error(String(err));
  return JSON.stringify({
    error_type: err instanceof HandlerError ? err.type : e.name || "Error",
    error_message: e.message,
    error_traceback: e.stack ?? "",
    hostname: hostname(),
    worker_id: workerId,
    runpod_version: "spool",
  });
}
