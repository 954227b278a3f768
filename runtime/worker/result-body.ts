import { errorShape } from "./error-shape.ts";

/**
 * The JSON text of a job-done body. A result JSON cannot carry (a BigInt, a cycle, a toJSON
 * that throws) becomes the job's error, naming the problem, instead of ending the worker.
 */
export function resultBody(body: { output?: unknown; error?: string; stopPod?: boolean }, workerId: string): string {
  try {
    return JSON.stringify(body);
  } catch (err) {
    const problem = new TypeError(`the handler's result cannot be sent as JSON: ${err instanceof Error ? err.message : String(err)}`);
    return JSON.stringify({ error: errorShape(problem, workerId), ...(body.stopPod ? { stopPod: true } : {}) });
  }
}
