import { z } from "zod";

/** GET /v2/<endpoint_id>/scaling: what an outside autoscaler (KEDA) reads for one endpoint. */
export const scalingSignalSchema = z.object({
  endpointId: z.string(),
  queued: z.number().int().describe("Queued jobs that count for scaling (not lowPriority)"),
  queuedLowPriority: z.number().int(),
  inProgress: z.number().int(),
  oldestQueuedAgeSeconds: z.number().describe("How long the oldest counted queued job has waited (QUEUE_DELAY's measure); 0 when none"),
  workers: z.number().int().describe("Workers heard from within the loss timeout, wherever they run"),
  desiredWorkers: z.number().int().describe("Workers the endpoint's scale rule wants now, clamped to workersMin..workersMax"),
  workersMin: z.number().int(),
  workersMax: z.number().int(),
});
export type ScalingSignal = z.infer<typeof scalingSignalSchema>;
