import type { Clock } from "../../clock.ts";
import type { Config } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import type { FileStore } from "../files/file-store.ts";
import type { Store } from "../store/store.ts";
import type { JobEvents } from "./job-events.ts";

const FILE_PRUNE_INTERVAL_MS = 10 * 60_000;
/** The lease under which one server runs retention, expiry, timeouts, worker loss and scaling. */
export const DUTIES_LEASE = "duties";

/** What the duties are run with. */
export interface MaintenanceDeps {
  store: Store;
  config: Config;
  clock: Clock;
  log: Log;
  /** Told of the jobs a sweep ended. */
  jobEvents: JobEvents;
  files: FileStore;
  /** This server's id: the holder of the duties lease. */
  serverId: string;
  /** Told whether each try for the duties lease got it. */
  metrics?: { leaseHeld(held: boolean): void };
}

/**
 * The housekeeping duties: expiry and retention, execution timeouts, worker loss, and removing
 * Idempotency-Keys past idempotencyTtlMs (store.sweep does all of them). Runs every
 * sweepIntervalMs on the injected clock; tests call sweep() after moving a manual clock.
 */
export function startMaintenance(deps: MaintenanceDeps): { sweep: () => Promise<void>; stop: () => Promise<void> } {
  const { store, clock, config, log, files } = deps;
  const leaseMs = Math.max(300, 3 * config.server.sweepIntervalMs);
  const stopped = new AbortController();
  let lastPrune = clock.now();

  /** The sweep reports ids only: read the ended jobs back (a rare path) for the job events. */
  async function announceEnded(ids: string[]): Promise<void> {
    const now = clock.now();
    for (const id of ids) {
      for (const endpointId of Object.keys(config.endpoints)) {
        const job = await store.get(endpointId, id, now);
        if (job) {
          deps.jobEvents.emit({ type: "ended", job });
          break;
        }
      }
    }
  }

  async function sweep(): Promise<void> {
    const report = await store.sweep(clock.now(), config.server.workerLossTimeoutMs);
    for (const t of report.timedOut) log.warn("job timed out", { jobId: t.jobId, workerId: t.workerId });
    for (const id of report.requeued) log.warn("worker lost; job re-queued", { jobId: id });
    for (const id of report.lost) log.warn("worker lost twice; job failed", { jobId: id });
    if (deps.jobEvents.listening) await announceEnded([...report.timedOut.map((t) => t.jobId), ...report.lost]);
    if (clock.now() - lastPrune >= FILE_PRUNE_INTERVAL_MS) {
      lastPrune = clock.now();
      files.prune(lastPrune);
    }
  }

  const loop = (async () => {
    while (!stopped.signal.aborted) {
      try {
        // With several servers on one store, exactly one (the lease holder) does these duties.
        const held = await store.tryLease(DUTIES_LEASE, deps.serverId, leaseMs, clock.now()).catch((err: unknown) => {
          deps.metrics?.leaseHeld(false); // the store did not answer: the lease may lapse
          throw err;
        });
        deps.metrics?.leaseHeld(held);
        if (held) await sweep();
      } catch (err) {
        log.error("maintenance sweep failed", { error: String(err) });
      }
      await clock.sleep(config.server.sweepIntervalMs, stopped.signal);
    }
  })();

  return {
    sweep,
    stop: async () => {
      stopped.abort();
      await loop;
    },
  };
}
