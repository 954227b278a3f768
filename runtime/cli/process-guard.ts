import type { Log } from "../log.ts";

/**
 * Keeps a server serving through a stray error: an unhandled rejection or uncaught exception is
 * logged with its stack and what it was, instead of ending the process with every request and
 * worker it holds. The code that threw is at fault and its own work is lost; the rest goes on.
 */
export function guardProcess(log: Log): () => void {
  const rejection = (reason: unknown) =>
    log.error("unhandled rejection (the server goes on)", { error: String(reason), stack: (reason as Error | undefined)?.stack });
  const exception = (err: Error, origin: string) =>
    log.error("uncaught exception (the server goes on)", { error: String(err), origin, stack: err?.stack });
  process.on("unhandledRejection", rejection);
  process.on("uncaughtException", exception);
  return () => {
    process.off("unhandledRejection", rejection);
    process.off("uncaughtException", exception);
  };
}
