import type { Clock } from "../../clock.ts";
import type { StopSource } from "../../process/owned-worker.ts";
import { topics } from "../store/store-events.ts";
import type { Store } from "../store/store.ts";
import { waitFor } from "./wait-for.ts";

/**
 * Waits of up to `waitMs` on a worker's stop list in the store, ending sooner on its stop topic:
 * the job-stop route answers a worker that polls with it, and the scaler's provider relays it to
 * the processes it owns.
 */
export function stopList(store: Store, clock: Clock, waitMs: number): (workerId: string) => StopSource {
  const wake = { events: store.events, clock };
  return (workerId) => async (signal) => {
    const ids = await waitFor(
      wake,
      topics.stop(workerId),
      waitMs,
      async () => {
        if (signal.aborted) return null;
        const stops = await store.takeStops(workerId);
        return stops.length ? stops : null;
      },
      signal,
    );
    return ids ?? [];
  };
}
