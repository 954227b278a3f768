/**
 * What a worker process tells the process that owns it (the scaler's provider, the supervisor of
 * `spool worker` or of a built binary), one JSON line each on the file descriptor WATCH_FD_ENV
 * names: who it is, which jobs it runs and their deadlines, so the owner can end the process when
 * a handler blocks its own event loop past them. The line is written synchronously before the
 * handler runs: an asynchronous send would still be queued when a handler that never yields takes
 * the loop.
 *
 * `hello` names the worker (the owner takes its stop list for it when it said so with
 * RELAY_STOPS_ENV; the worker then reads OwnerMessage lines on its stdin instead of polling
 * job-stop itself); `drainMs` is how long it may take to end once told to stop with jobs running
 * (its drain time plus its grace).
 */
export type WorkerIpcMessage =
  | { type: "hello"; workerId: string; drainMs: number }
  | { type: "job-start"; jobId: string; timeoutMs: number; graceMs: number }
  | { type: "job-end"; jobId: string };

const WORKER_IPC_TYPES = new Set(["hello", "job-start", "job-end"]);

export const isWorkerIpcMessage = (m: unknown): m is WorkerIpcMessage =>
  typeof m === "object" && m !== null && WORKER_IPC_TYPES.has((m as { type?: unknown }).type as string);

/**
 * What an owner tells a watched worker, one JSON line each on the worker's stdin: jobs cancelled
 * on the server (the owner takes the worker's stop list for it, so that it can also end the
 * process when the handler does not stop).
 */
export type OwnerMessage = { type: "stop"; jobIds: string[] };

/** The file descriptor a worker writes WorkerIpcMessage lines to; unset when no owner listens. */
export const WATCH_FD_ENV = "SPOOL_WATCH_FD";
/** Set to "1" by an owner that takes the worker's stop list and relays it (OwnerMessage on stdin). */
export const RELAY_STOPS_ENV = "SPOOL_OWNER_RELAYS_STOPS";
/** The descriptor owners give: the one after stdin, stdout and stderr. */
export const WATCH_FD = 3;

/** After SIGTERM, how long a worker process has before SIGKILL, unless its owner is told otherwise. */
export const KILL_GRACE_DEFAULT_MS = 5_000;
/** Overrides KILL_GRACE_DEFAULT_MS for the supervisor of `spool worker` and built binaries. */
export const KILL_GRACE_ENV = "SPOOL_KILL_GRACE_MS";
