/** How a worker that never became ready ended: its exit code or signal and its last error output. */
export interface StartExit {
  code?: number;
  signal?: string;
  /** The last lines it wrote to stderr (or the reason it reported itself). */
  output: string;
  /** It was ended at its start deadline (startTimeoutMs), after this long. */
  timedOutMs?: number;
  /** Trying again will not help (the handler cannot load). */
  permanent?: boolean;
}

/** One line that says why: the last error line of its output, with how it ended. */
export function startErrorMessage(exit: StartExit): string {
  const lines = exit.output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^at\s/.test(l) && !/^\d+ \|/.test(l));
  const line = lines.findLast((l) => /error|not found|cannot|failed|denied|killed|memory/i.test(l)) ?? lines.at(-1);
  if (exit.timedOutMs !== undefined) {
    // A stalled setup rarely prints an error: its last line (a download's progress, say) is the clue.
    const last = lines.at(-1);
    return `start timed out after ${exit.timedOutMs / 1000} s: the worker was not ready, so it was ended${last ? ` (its last output: ${last})` : ""}`;
  }
  if (exit.code === undefined && !exit.signal) return line ?? "the worker reported that it cannot start";
  const how = exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
  const when = exit.permanent ? "before it was ready; trying again will not help" : "before it was ready";
  return line ? `${line} (${how} ${when})` : `the worker ${how} ${when}`;
}
