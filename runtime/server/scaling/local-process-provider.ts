import { accessSync, constants, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { isHandlerSource } from "../../executable.ts";
import { stderrLog, type Log } from "../../log.ts";
import { launchWorker, kernelEndsOrphans } from "../../process/launch.ts";
import { OwnedWorker, watchEnv, type StopSource } from "../../process/owned-worker.ts";
import { gpuDeviceNodes } from "../../process/sandbox.ts";
import { workerEnvironment } from "../../process/worker-environment.ts";
import { EXIT_REPLACE } from "../../protocol/exit-codes.ts";
import { EXIT_WITH_PARENT_ENV } from "../../protocol/worker-env.ts";
import { KILL_GRACE_DEFAULT_MS } from "../../protocol/worker-ipc.ts";
import { OutputTail } from "./output-tail.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "./worker-provider.ts";

const CLI = resolve(import.meta.dir, "../../cli.ts");
/** How long a worker's error output is still read once its process tree is gone. */
const STDERR_DRAIN_MS = 500;

export interface LocalProcessOptions {
  log?: Log;
  /** SIGTERM to SIGKILL. */
  killGraceMs?: number;
  /** Where a worker's stop list is taken (the store); the provider relays it to the process. */
  stopsFor?: (workerId: string) => StopSource;
  /** Run each worker in a bubblewrap sandbox that cannot see these paths (the data dir, the config file); none: no sandbox. */
  sandbox?: { hidden: string[] };
  /** Told each line of a worker's error output (the dashboard's endpoint view shows the last ones). */
  onOutput?: (endpointId: string, workerId: string, line: string) => void;
}

/**
 * Workers as local processes: `spool worker <handler>` for a source file, or the built binary
 * itself. Unsupervised: the scaler restarts them. Each runs in a process group of its own, or a
 * sandbox, and counts as gone only when all its processes are. Its environment is the allow-list
 * of workerEnvironment plus its own key, never the server's whole one. This provider owns the
 * process, so it enforces its limits: a job past its deadline and grace, or cancelled and not
 * ended within that grace, ends the process tree (SIGTERM, then SIGKILL after `killGraceMs`).
 */
export class LocalProcessProvider implements WorkerProvider {
  readonly #log: Log;
  readonly #killGraceMs: number;
  readonly #stopsFor?: (workerId: string) => StopSource;
  readonly #sandbox?: { hidden: string[] };
  readonly #onOutput?: LocalProcessOptions["onOutput"];

  constructor(options: LocalProcessOptions = {}) {
    this.#log = options.log ?? stderrLog;
    this.#killGraceMs = options.killGraceMs ?? KILL_GRACE_DEFAULT_MS;
    this.#stopsFor = options.stopsFor;
    this.#sandbox = options.sandbox;
    this.#onOutput = options.onOutput;
  }

  start(spec: WorkerSpec): WorkerHandle {
    const flags = ["--no-supervise", "--worker-id", spec.workerId, "--url", spec.serverUrl, "--endpoint", spec.endpointId];
    const cmd = isHandlerSource(spec.handler) ? [process.execPath, CLI, "worker", spec.handler, ...flags] : [spec.handler, ...flags];
    let proc: ReturnType<typeof launchWorker>;
    try {
      proc = this.#launch(cmd, spec);
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
    const onOutput = this.#onOutput;
    const copied = tail.copy(proc.stderr!, process.stderr, onOutput && ((line) => onOutput(spec.endpointId, spec.workerId, line)));
    const owned = new OwnedWorker(proc, {
      killGraceMs: this.#killGraceMs,
      log: this.#log,
      stopsFor: this.#stopsFor,
      workerId: spec.workerId,
    });
    const { watchdog } = owned;
    return {
      workerId: spec.workerId,
      // Gone when its process tree is; a helper that kept the error pipe open does not hold it.
      // Ended for its deadline or a cancel: replaced at once, like a worker that asked to be.
      exited: proc.exited.then(async (code) => {
        await Promise.all([Promise.race([copied, Bun.sleep(STDERR_DRAIN_MS)]), owned.closed]);
        return watchdog.fired ? EXIT_REPLACE : code;
      }),
      stop: (graceMs) => owned.stop(graceMs),
      kill: () => proc.kill("SIGKILL"),
      overdue: () => watchdog.overdue || owned.stopsPending,
      exitDetail: () => ({ signal: proc.signalCode ?? undefined, output: tail.text() }),
    };
  }

  #launch(cmd: string[], spec: WorkerSpec) {
    // Checked here: behind bwrap or setpriv a missing binary would only be their exit code.
    accessSync(cmd[0]!, constants.X_OK);
    const sandboxed = this.#sandbox !== undefined;
    const scratch = spec.scratchDir;
    if (scratch) mkdirSync(join(scratch, "tmp"), { recursive: true });
    const own: Record<string, string | undefined> = {
      ...spec.env,
      ...watchEnv(this.#stopsFor !== undefined),
      SPOOL_API_KEY: spec.apiKey,
      // Where the kernel cannot end an orphaned worker, the worker watches its parent itself.
      [EXIT_WITH_PARENT_ENV]: kernelEndsOrphans(sandboxed) ? undefined : "1",
      ...(scratch ? { SPOOL_DATA_DIR: scratch } : {}),
      // In the sandbox the host is read-only: temporary files and caches (a built worker's native
      // libraries among them) go to the endpoint's own folder, never to one another tenant writes.
      ...(sandboxed && scratch
        ? { TMPDIR: join(scratch, "tmp"), XDG_CACHE_HOME: join(scratch, "cache"), SPOOL_CACHE_DIR: join(scratch, "cache") }
        : {}),
    };
    return launchWorker(cmd, {
      env: workerEnvironment(process.env, own, spec.endpointEnv),
      // stderr is piped to keep its tail (why a start failed); stdin carries stops in, fd 3 job starts and ends out.
      stderr: "pipe",
      sandbox: sandboxed
        ? { hidden: this.#sandbox!.hidden, writable: scratch ? [scratch] : [], devices: spec.usesGpus ? gpuDeviceNodes() : [] }
        : undefined,
    });
  }
}
