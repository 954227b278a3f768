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
export function fleetOf(
  own: ReadonlyMap<string, OwnWorker>,
  stats: Pick<ScalingStats, "workers">,
): { current: number; initializing: number } {
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

/**
 * Other servers' workers that nobody stops now: busy, or idle for less than idleTimeout. A server
 * that does not hold the scaling lease counts only these beside its own when it stops idle
 * workers, since the holder and the other servers may be stopping theirs at the same moment:
 * each keeps the floor on its own count, so together they never take the fleet below it.
 */
export function othersKept(own: ReadonlyMap<string, OwnWorker>, stats: Pick<ScalingStats, "workers">, idleMs: number, now: number): number {
  let kept = 0;
  for (const w of stats.workers) if (!own.has(w.id) && (w.running > 0 || now - (w.lastActive ?? 0) < idleMs)) kept++;
  return kept;
}
