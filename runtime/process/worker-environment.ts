/**
 * The environment a worker the server starts gets: no more of the server's own than a handler
 * needs to run (its secrets, a Redis URL with a password, cloud keys stay with the server).
 */

/** Variables passed on by name. */
const PASSED = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TERM",
  "NO_COLOR",
  "FORCE_COLOR",
  "TMPDIR",
  "LD_LIBRARY_PATH",
  "XDG_CACHE_HOME",
  // Worker settings an operator may give the server to pass on to its workers.
  "SPOOL_TIMEOUT_GRACE_MS",
  "SPOOL_DRAIN_TIMEOUT_MS",
  "SPOOL_REQUEST_TIMEOUT_MS",
  "SPOOL_LONG_POLL_TIMEOUT_MS",
  "SPOOL_EXIT_WHEN_IDLE_MS",
  "SPOOL_KILL_GRACE_MS",
  "SPOOL_CACHE_DIR",
  "RUNPOD_PING_INTERVAL",
]);

/** Variables passed on by prefix: locale, GPU runtimes and drivers, tracing. */
const PASSED_PREFIXES = ["LC_", "CUDA_", "NVIDIA_", "VK_", "GGML_", "HIP_", "ROCR_", "OTEL_"];

/** Whether a variable of the server's environment reaches its workers. */
export const passedToWorkers = (name: string): boolean => PASSED.has(name) || PASSED_PREFIXES.some((p) => name.startsWith(p));

/**
 * The allowed part of `server` (the server's environment), then what Spool sets for this worker
 * (`own`: its key, options, GPUs, watch channel), then the endpoint's `env` table from the config,
 * which may set anything but what Spool sets itself.
 */
export function workerEnvironment(
  server: Record<string, string | undefined>,
  own: Record<string, string | undefined>,
  endpoint: Record<string, string> = {},
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(server)) if (value !== undefined && passedToWorkers(name)) env[name] = value;
  for (const [name, value] of Object.entries(endpoint)) if (!Object.hasOwn(own, name)) env[name] = value;
  return { ...env, ...own };
}
