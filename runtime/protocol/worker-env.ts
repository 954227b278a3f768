/** Environment variables between a worker process and whoever starts it (supervisor, scaler). */

/** Set for the child a supervisor starts: that process runs the worker loop itself. */
export const CHILD_ENV = "SPOOL_WORKER_CHILD";
/** Which child this is: the first keeps the worker id, replacements add -r2, -r3... */
export const GENERATION_ENV = "SPOOL_WORKER_GENERATION";
/** Set by the scaler: a worker it started must not outlive it (a server killed with SIGKILL). */
export const EXIT_WITH_PARENT_ENV = "SPOOL_EXIT_WITH_PARENT";
/** An endpoint's handler options (JSON), from the scaler or supervisor to the handler. */
export const OPTIONS_ENV = "SPOOL_HANDLER_OPTIONS";
