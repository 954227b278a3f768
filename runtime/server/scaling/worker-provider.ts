/** What a provider needs to start one worker for an endpoint. */
export interface WorkerSpec {
  endpointId: string;
  workerId: string;
  /** Handler file (.ts/.js) or an executable built by `spool build`. */
  handler: string;
  serverUrl: string;
  apiKey: string;
  /** Environment Spool sets for the worker: its handler options (SPOOL_HANDLER_OPTIONS) and GPUs. */
  env: Record<string, string>;
  /** The endpoint's own `env` table from the config. */
  endpointEnv?: Record<string, string>;
  /** The endpoint's writable folder (SPOOL_DATA_DIR for its handler: models, caches, scratch). */
  scratchDir?: string;
  /** Whether the worker was given GPUs (their device nodes are bound into a sandbox). */
  usesGpus?: boolean;
}

export interface WorkerHandle {
  readonly workerId: string;
  /** Resolves with the exit code when the worker is gone, for whatever reason. */
  readonly exited: Promise<number>;
  /**
   * Asks the worker to drain and stop (SIGTERM for a process), and ends it if still there after
   * `graceMs`; by default after the provider's kill grace, plus the worker's drain time while it
   * still runs jobs.
   */
  stop(graceMs?: number): void;
  /** Ends it at once. */
  kill(): void;
  /** Once `exited` has resolved: the signal that ended it, if any, and the last lines of its error output. */
  exitDetail?(): { signal?: string; output: string };
  /** True while it runs a job past that job's deadline (its owner is ending it). */
  overdue?(): boolean;
}

/**
 * Starts workers somewhere: local processes here; another provider (containers, say) implements
 * the same one method, and the handle it returns stops the worker, without touching the scaler.
 */
export interface WorkerProvider {
  start(spec: WorkerSpec): WorkerHandle;
}
