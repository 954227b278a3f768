import { EXIT_START_PERMANENT } from "../protocol/exit-codes.ts";

/** Whether an error thrown at start says that trying again will not help (the SDK's PermanentStartError, or any error with `permanent = true`). */
export const isPermanentStartError = (err: unknown): boolean =>
  typeof err === "object" && err !== null && (err as { permanent?: unknown }).permanent === true;

/**
 * A worker that cannot start and will not by trying again: the reason goes to stderr as its last
 * line (its owner shows that line), and the exit code tells the owner not to wait for a retry.
 */
export function cannotStart(err: unknown): number {
  console.error(`spool: ${err instanceof Error ? err.message : String(err)}`);
  return EXIT_START_PERMANENT;
}
