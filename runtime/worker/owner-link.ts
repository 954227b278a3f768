import { writeSync } from "node:fs";
import { RELAY_STOPS_ENV, WATCH_FD_ENV, type OwnerMessage, type WorkerIpcMessage } from "../protocol/worker-ipc.ts";
import { readJsonLines } from "../process/json-lines.ts";
import type { StopSource } from "../process/owned-worker.ts";

/** A worker process's link to the process that owns it (see WorkerIpcMessage). */
export interface OwnerLink {
  /** Writes one message synchronously on the watch channel. */
  report(message: WorkerIpcMessage): void;
  /** The stop list, as the owner relays it; none when the owner does not (the worker polls job-stop). */
  stops?: StopSource;
}

const isOwnerMessage = (m: unknown): m is OwnerMessage =>
  typeof m === "object" && m !== null && (m as OwnerMessage).type === "stop" && Array.isArray((m as OwnerMessage).jobIds);

/** The worker's side, or none when no owner watches it (its stop list then comes from job-stop). */
export function ownerLink(env: Record<string, string | undefined>, input: () => ReadableStream<Uint8Array>): OwnerLink | undefined {
  const fd = Number(env[WATCH_FD_ENV]);
  if (!Number.isInteger(fd) || fd < 3) return undefined;
  return {
    report: (m) => {
      try {
        writeSync(fd, `${JSON.stringify(m)}\n`);
      } catch {
        // the owner is gone: nothing to tell
      }
    },
    stops: env[RELAY_STOPS_ENV] === "1" ? relayedStops(input()) : undefined,
  };
}

/** Stop ids read from the owner's lines, handed out in the shape of a job-stop long-poll. */
function relayedStops(input: ReadableStream<Uint8Array>): StopSource {
  let queued: string[] = [];
  let wake: (() => void) | undefined;
  void readJsonLines(input, (m) => {
    if (!isOwnerMessage(m)) return;
    queued.push(...m.jobIds.filter((id): id is string => typeof id === "string"));
    wake?.();
  });
  return async (signal) => {
    while (!queued.length && !signal.aborted) {
      const { promise, resolve } = Promise.withResolvers<void>();
      const stop = () => resolve();
      wake = stop;
      signal.addEventListener("abort", stop);
      await promise;
      signal.removeEventListener("abort", stop);
      wake = undefined;
    }
    const ids = queued;
    queued = [];
    return ids;
  };
}
