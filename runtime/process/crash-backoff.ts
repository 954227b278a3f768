/** The wait before a start after one crash; each crash in a row doubles it, up to MAX_WAIT_MS. */
const FIRST_WAIT_MS = 500;
const MAX_WAIT_MS = 30_000;
/** A process that lived this long before it crashed was healthy: its crash starts a new run of them. */
const HEALTHY_AFTER_MS = 60_000;

/**
 * The one crash backoff of a worker's owner (the scaler, per endpoint; the worker's supervisor):
 * after `crashes` crashes in a row, one more of a process that lived `livedMs`, the crashes in a
 * row now and how long to wait before starting another: 0.5 s, doubling to 30 s; a process that
 * lived 60 s starts the count again. An owner sets its count to 0 when a process ends for another
 * cause than a crash.
 * @example const { crashes, waitMs } = afterCrash(state.crashes, now - startedAt);
 */
export function afterCrash(crashes: number, livedMs: number): { crashes: number; waitMs: number } {
  const inRow = livedMs >= HEALTHY_AFTER_MS ? 1 : crashes + 1;
  return { crashes: inRow, waitMs: Math.min(MAX_WAIT_MS, FIRST_WAIT_MS * 2 ** (inRow - 1)) };
}
