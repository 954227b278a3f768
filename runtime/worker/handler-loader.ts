import { resolve } from "node:path";
import { isHandler, type Handler } from "../../sdk/define-handler.ts";

/** Imports a handler module; its default export must come from defineHandler. */
export async function loadHandler(path: string): Promise<Handler> {
  const full = resolve(path);
  if (!(await Bun.file(full).exists())) throw new Error(`handler file not found: ${path}`);
  let mod: { default?: unknown };
  try {
    mod = (await import(full)) as { default?: unknown };
  } catch (err) {
    // Bun's syntax errors (BuildMessage) name the place apart from the message.
    const at = (err as { position?: { file?: string; line?: number; column?: number } }).position;
    const where = at?.file ? `${at.file}:${at.line}:${at.column}` : path;
    throw new Error(`cannot load ${where}: ${(err as { message?: unknown })?.message ?? String(err)}`, { cause: err });
  }
  if (!isHandler(mod.default)) {
    throw new Error(`${path} must \`export default defineHandler({ input, handler })\` (from spool/sdk)`);
  }
  return mod.default;
}
