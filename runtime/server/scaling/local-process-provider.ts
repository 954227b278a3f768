import { resolve } from "node:path";
import { isHandlerSource } from "../../build/executable.ts";
import { stderrLog, type Log } from "../../log.ts";
import { EXIT_REPLACE } from "../../protocol/exit-codes.ts";
import { EXIT_WITH_PARENT_ENV } from "../../protocol/worker-env.ts";
import { KILL_GRACE_DEFAULT_MS } from "../../protocol/worker-ipc.ts";
import { OwnedWorker, watchedStdio, watchEnv, type StopSource } from "../../worker/owned-worker.ts";
import { OutputTail } from "./output-tail.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "./worker-provider.ts";

const CLI = resolve(import.meta.dir, "../../cli.ts");

/**
 * Workers as local processes: `spool worker <handler>` for a source file, or the built binary
 * itself. Unsupervised: the scaler restarts them. The key travels in the environment, not argv.
 * This provider owns the process, so it enforces its limits: a job past its deadline and grace,
 * or cancelled and not ended within that grace, ends the process (SIGTERM, then SIGKILL after
 * `killGraceMs`), and every stop escalates the same way. `stopsFor` gives the worker's stop list
 * (from the store), which the provider relays to the process.
 */
export class LocalProcessProvider implements WorkerProvider {
  constructor(
    private readonly log: Log = stderrLog,
    private readonly killGraceMs = KILL_GRACE_DEFAULT_MS,
    private readonly stopsFor?: (workerId: string) => StopSource,
  ) {}

  start(spec: WorkerSpec): WorkerHandle {
    const flags = ["--no-supervise", "--worker-id", spec.workerId, "--url", spec.serverUrl, "--endpoint", spec.endpointId];
    const cmd = isHandlerSource(spec.handler) ? [process.execPath, CLI, "worker", spec.handler, ...flags] : [spec.handler, ...flags];
    let proc: ReturnType<LocalProcessProvider["spawn"]>;
    try {
      proc = this.spawn(cmd, spec);
    } catch (err) {
      // A binary that is missing or not executable: a worker that failed to start, with the reason.
      return {
        workerId: spec.workerId,
        exited: Promise.resolve(127),
        stop: () => {},
        kill: () => {},
        exitDetail: () => ({ output: `cannot start ${cmd[0]}: ${(err as Error).message}` }),
      };
    }
    // Its error output still reaches the server's; the tail is kept to say why a start failed.
    const tail = new OutputTail();
    const copied = tail.copy(proc.stderr, process.stderr);
    const owned = new OwnedWorker(proc, { killGraceMs: this.killGraceMs, log: this.log, stopsFor: this.stopsFor, workerId: spec.workerId });
    const { watchdog } = owned;
    return {
      workerId: spec.workerId,
      // Ended for its deadline or a cancel: replaced at once, like a worker that asked to be.
      exited: proc.exited.then(async (code) => (await copied, watchdog.fired ? EXIT_REPLACE : code)),
      stop: (graceMs) => owned.stop(graceMs),
      kill: () => proc.kill("SIGKILL"),
      overdue: () => watchdog.overdue,
      exitDetail: () => ({ signal: proc.signalCode ? String(proc.signalCode) : undefined, output: tail.text() }),
    };
  }

  private spawn(cmd: string[], spec: WorkerSpec) {
    return Bun.spawn(cmd, {
      env: {
        ...process.env,
        ...spec.env,
        ...watchEnv(this.stopsFor !== undefined),
        SPOOL_API_KEY: spec.apiKey,
        [EXIT_WITH_PARENT_ENV]: "1", // a server killed with SIGKILL leaves no worker behind
        RUNPOD_WEBHOOK_GET_JOB: undefined,
        RUNPOD_POD_ID: undefined,
      },
      // stderr is piped to keep its tail (why a start failed); stdin carries stops in, fd 3 job starts and ends out.
      stdio: [...watchedStdio("pipe")],
    });
  }
}
