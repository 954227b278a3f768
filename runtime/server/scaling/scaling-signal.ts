import type { Clock } from "../../clock.ts";
import type { Config, EndpointConfig } from "../../config/config.ts";
import type { ScalingSignal } from "../../protocol/scaling-signal.ts";
import type { Store } from "../store/store.ts";
import { othersKept } from "./fleet.ts";
import { targetWorkers } from "./scale-decision.ts";
import type { ScalerView } from "./scaler-view.ts";

const NONE = new Map<string, never>();

export interface SignalDeps {
  store: Store;
  config: Config;
  clock: Clock;
  /** This server's scaler: its workers not heard from yet count as current ones. */
  scaler?: Pick<ScalerView, "initializing">;
  /** Endpoints whose workers keep failing to start: one worker is still wanted, to try again. */
  startFailures?: { retrying(endpointId: string): boolean };
}

/**
 * The endpoint's scaling signal, from one store.scalingStats call (constant cost in queue depth).
 * The desired count is scale-decision.ts's, with the connected workers as the current ones; with
 * an empty queue only those Spool's scaler would keep (busy, or idle for less than idleTimeout),
 * since QUEUE_DELAY keeps the current count while nothing waits: idle ones counted there would be
 * wanted for ever. A ScaledObject with targetValue 1 so follows Spool's rule, scale-in included.
 */
export async function scalingSignal(deps: SignalDeps, endpointId: string, endpoint: EndpointConfig): Promise<ScalingSignal> {
  const { store, config, clock } = deps;
  const now = clock.now();
  const stats = await store.scalingStats(endpointId, now, config.server.workerLossTimeoutMs);
  const initializing = deps.scaler?.initializing(endpointId) ?? 0;
  // While jobs wait every connected worker counts (each is about to take one); once none waits,
  // only those Spool's scaler would keep, so an idle one past idleTimeout is no longer wanted.
  const connected = stats.queued > 0 ? stats.workers.length : othersKept(NONE, stats, endpoint.idleTimeout * 1000, now);
  const current = connected + initializing;
  return {
    endpointId,
    queued: stats.queued,
    queuedLowPriority: stats.queuedLowPriority,
    inProgress: stats.inProgress,
    oldestQueuedAgeSeconds: stats.oldestQueuedAt === undefined ? 0 : Math.max(0, now - stats.oldestQueuedAt) / 1000,
    workers: stats.workers.length,
    // As the scaler does: while starts keep failing (its jobs failed, submissions refused), one
    // worker is still wanted, or an outside autoscaler would stop trying at zero.
    desiredWorkers: Math.max(
      targetWorkers({ config: endpoint, stats, current, initializing, now }),
      deps.startFailures?.retrying(endpointId) ? 1 : 0,
    ),
    workersMin: endpoint.workersMin,
    workersMax: endpoint.workersMax,
  };
}
