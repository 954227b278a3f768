/** One line of a worker's own: the scaler's start and exit, or a line of the worker's error output. */
export interface WorkerLogLine {
  time: number;
  workerId: string;
  message: string;
}

/** Lines kept per endpoint (the oldest go first). */
const KEEP = 200;

/**
 * The last lines about each endpoint's workers that this server started, in memory: what the
 * dashboard's endpoint view shows. Lost on restart, by design: it is a window, not a record.
 */
export class WorkerLogBook {
  readonly #lines = new Map<string, WorkerLogLine[]>();

  add(endpointId: string, workerId: string, message: string, time: number): void {
    let lines = this.#lines.get(endpointId);
    if (!lines) this.#lines.set(endpointId, (lines = []));
    lines.push({ time, workerId, message: message.length > 2000 ? `${message.slice(0, 2000)}…` : message });
    if (lines.length > KEEP) lines.splice(0, lines.length - KEEP);
  }

  lines(endpointId: string): WorkerLogLine[] {
    return [...(this.#lines.get(endpointId) ?? [])];
  }
}
