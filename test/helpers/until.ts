/**
 * Polls a condition until it holds: between event-loop turns at first, then every few ms while
 * other processes (workers starting) catch up. Gives up after `limitMs`; time passing is never
 * what a test waits for.
 */
export async function until<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  what: string,
  limitMs = 15_000,
): Promise<T> {
  const deadline = performance.now() + limitMs;
  for (let i = 0; performance.now() < deadline; i++) {
    const v = await check();
    if (v) return v;
    await Bun.sleep(i < 1_000 ? 0 : 2);
  }
  throw new Error(`gave up waiting for ${what}`);
}
