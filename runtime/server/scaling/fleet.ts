import type { ScalingStats } from "../store/store.ts";

/** A worker this server's scaler started, as the fleet count needs it. */
export interface OwnWorker {
  stopping: boolean;
  /** Heard from: it has reached a server at least once. */
  seen: boolean;
}

/**
 * An endpoint's workers counted from the store, so that every server's scaler sees the same fleet
 * (after the scaling lease moves too): the workers heard from lately, whoever started them, less
 * this server's own that are being stopped, plus its own started and not heard from yet.
 */
export function fleetOf(own: ReadonlyMap<string, OwnWorker>, stats: Pick<ScalingStats, "workers">): { current: number; initializing: number } {
  let others = 0;
  for (const w of stats.workers) if (!own.has(w.id)) others++;
  let live = 0;
  let initializing = 0;
  for (const w of own.values()) {
    if (w.stopping) continue;
    live++;
    if (!w.seen) initializing++;
  }
  return { current: live + others, initializing };
}
