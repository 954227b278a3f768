import { describeIssues } from "../protocol/job-request.ts";
import { OPTIONS_ENV, type Handler } from "../../sdk/define-handler.ts";

/** The endpoint's handler options from the environment, parsed with the handler's schema. */
export function handlerOptions(handler: Handler, env: Record<string, string | undefined>): unknown {
  let raw: unknown = {};
  const text = env[OPTIONS_ENV];
  if (text) {
    try {
      raw = JSON.parse(text);
    } catch {
      throw new Error(`${OPTIONS_ENV} is not valid JSON`);
    }
  }
  if (!handler.options) return raw;
  const parsed = handler.options.safeParse(raw);
  if (!parsed.success) throw new Error(`handler options: ${describeIssues(parsed.error)}`);
  return parsed.data;
}
