import { resolve } from "node:path";
import { isHandler, type Handler } from "../../sdk/define-handler.ts";

/** Imports a handler module; its default export must come from defineHandler. */
export async function loadHandler(path: string): Promise<Handler> {
  const full = resolve(path);
  if (!(await Bun.file(full).exists())) throw new Error(`handler file not found: ${path}`);
  const mod = (await import(full)) as { default?: unknown };
  if (!isHandler(mod.default)) {
    throw new Error(`${path} must \`export default defineHandler({ input, handler })\` (from spool/sdk)`);
  }
  return mod.default;
}
