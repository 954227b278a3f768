import { resolve } from "node:path";
import { isHandlerSource } from "../../build/executable.ts";
import { stderrLog, type Log } from "../../log.ts";
import { EXIT_REPLACE } from "../../protocol/exit-codes.ts";
import { EXIT_WITH_PARENT_ENV } from "../../protocol/worker-env.ts";
import { KILL_GRACE_DEFAULT_MS } from "../../protocol/worker-ipc.ts";
import { JobWatchdog, readWatchLines, terminate, watchedStdio, watchEnv } from "../../worker/process-stop.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "./worker-provider.ts";

const CLI = resolve(import.meta.dir, "../../cli.ts");

/**
 * Workers as local processes: `spool worker <handler>` for a source file, or the built binary
 * itself. Unsupervised: the scaler restarts them. The key travels in the environment, not argv.
 * This provider owns the process, so it enforces its limits: a job past its deadline and grace
 * ends the process (SIGTERM, then SIGKILL after `killGraceMs`), and so does every stop.
 */
export class LocalProcessProvider implements WorkerProvider {
  constructor(
    private readonly log: Log = stderrLog,
    private readonly killGraceMs = KILL_GRACE_DEFAULT_MS,
  ) {}

  start(spec: WorkerSpec): WorkerHandle {
    const flags = ["--no-supervise", "--worker-id", spec.workerId, "--url", spec.serverUrl, "--endpoint", spec.endpointId];
    const cmd = isHandlerSource(spec.handler) ? [process.execPath, CLI, "worker", spec.handler, ...flags] : [spec.handler, ...flags];
    const proc = Bun.spawn(cmd, {
      env: {
        ...process.env,
        ...spec.env,
        ...watchEnv,
        SPOOL_API_KEY: spec.apiKey,
        [EXIT_WITH_PARENT_ENV]: "1", // a server killed with SIGKILL leaves no worker behind
        RUNPOD_WEBHOOK_GET_JOB: undefined,
        RUNPOD_POD_ID: undefined,
      },
      stdio: [...watchedStdio("ignore")],
    });
    const watchdog = new JobWatchdog(proc, this.killGraceMs, this.log);
    void readWatchLines(proc.stdio[3], watchdog.message);
    return {
      workerId: spec.workerId,
      // Ended for its deadline: replaced at once, like a worker that asked to be.
      exited: proc.exited.then((code) => (watchdog.fired ? EXIT_REPLACE : code)),
      stop: (graceMs = this.killGraceMs) => terminate(proc, graceMs),
      kill: () => proc.kill("SIGKILL"),
      overdue: () => watchdog.overdue,
    };
  }
}
