/** The mark `defineHandler` puts on a handler, by which a loaded module's default export is known. */
export const HANDLER_KIND = "spool-handler";

/** A value marked as a handler; its `input`, when present, is the handler's input schema. */
export function hasHandlerKind(value: unknown): value is { kind: typeof HANDLER_KIND; input?: unknown } {
  return typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === HANDLER_KIND;
}
