import type { Clock } from "../../clock.ts";
import type { StoreEvents } from "../store/store-events.ts";

/**
 * Long-poll: runs `check` until it returns a value, waking on `topic` instead of polling (and
 * every `events.recheckMs` where announcements can be lost), and gives up with null after `ms`
 * or when `signal` (the client going away) aborts. The listener is
 * attached before each check so that no announcement between check and sleep is missed.
 */
export async function waitFor<T>(
  deps: { events: StoreEvents; clock: Clock },
  topic: string,
  ms: number,
  check: () => Promise<T | null>,
  signal?: AbortSignal,
  /** Given a function that wakes the current wait as the topic would (for wake-ups without a store announcement). */
  onWake?: (wake: () => void) => void,
): Promise<T | null> {
  const deadline = deps.clock.now() + ms;
  for (;;) {
    const wake = new AbortController();
    const off = deps.events.on(topic, () => wake.abort());
    onWake?.(() => wake.abort());
    try {
      const value = await check();
      if (value !== null) return value;
      const left = deadline - deps.clock.now();
      if (left <= 0 || signal?.aborted) return null;
      await deps.clock.sleep(Math.min(left, deps.events.recheckMs ?? left), signal ? AbortSignal.any([wake.signal, signal]) : wake.signal);
      if (signal?.aborted) return null;
    } finally {
      off();
    }
  }
}
