import type { JobResponse } from "./job-response.ts";

/** An event of GET /dashboard/api/events: a job of an endpoint the key may see changed, or a refusal. */
export interface DashboardEvent {
  type: "submitted" | "taken" | "ended" | "refused" | "retried" | "purged";
  endpointId: string;
  /** The job's status answer without output or error. */
  job?: Omit<JobResponse, "output" | "error"> & { createdAt: string; sync: boolean };
  /** Why a request was refused (type "refused"). */
  reason?: string;
  /** How many queued jobs were removed (type "purged"). */
  count?: number;
}
