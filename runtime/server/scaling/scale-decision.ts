import type { EndpointConfig } from "../../config/config.ts";
import type { ScalingStats } from "../store/store.ts";

export interface ScaleInput {
  config: Pick<EndpointConfig, "workersMin" | "workersMax" | "scalerType" | "scalerValue">;
  stats: Pick<ScalingStats, "queued" | "inProgress" | "oldestQueuedAt">;
  /** Workers started and not being stopped. */
  current: number;
  /** Of those, how many have not been heard from yet. */
  initializing: number;
  now: number;
}

const clamp = (n: number, min: number, max: number) => Math.min(max, Math.max(min, n));

/**
 * How many workers the endpoint should have now.
 * REQUEST_COUNT: ceil((queued + in progress) / scalerValue).
 * QUEUE_DELAY: one more when a job has waited scalerValue seconds (or at once from zero), never
 * while a new worker is still starting.
 * Queued lowPriority jobs are not in `stats.queued`, so they never cause a scale-up.
 */
export function targetWorkers({ config, stats, current, initializing, now }: ScaleInput): number {
  const { workersMin, workersMax, scalerType, scalerValue } = config;
  let target: number;
  if (scalerType === "REQUEST_COUNT") {
    target = Math.ceil((stats.queued + stats.inProgress) / scalerValue);
  } else {
    target = current;
    const waited = stats.oldestQueuedAt === undefined ? 0 : now - stats.oldestQueuedAt;
    if (stats.queued > 0 && (current === 0 || (waited >= scalerValue * 1000 && initializing === 0))) target = current + 1;
  }
  return clamp(target, workersMin, workersMax);
}

/** Workers an endpoint keeps even when idle: workersMin, or more while REQUEST_COUNT asks for them. */
export function floorWorkers(input: ScaleInput): number {
  return input.config.scalerType === "REQUEST_COUNT" ? targetWorkers(input) : input.config.workersMin;
}
