import { resolve } from "node:path";
import { isHandlerSource } from "../../build/executable.ts";
import { EXIT_WITH_PARENT_ENV } from "../../protocol/worker-env.ts";
import { OutputTail } from "./output-tail.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "./worker-provider.ts";

const CLI = resolve(import.meta.dir, "../../cli.ts");

/**
 * Workers as local processes: `spool worker <handler>` for a source file, or the built binary
 * itself. Unsupervised: the scaler restarts them. The key travels in the environment, not argv.
 */
export class LocalProcessProvider implements WorkerProvider {
  start(spec: WorkerSpec): WorkerHandle {
    const flags = ["--no-supervise", "--worker-id", spec.workerId, "--url", spec.serverUrl, "--endpoint", spec.endpointId];
    const cmd = isHandlerSource(spec.handler) ? [process.execPath, CLI, "worker", spec.handler, ...flags] : [spec.handler, ...flags];
    let proc: Bun.Subprocess<"ignore", "inherit", "pipe">;
    try {
      proc = this.#spawn(cmd, spec);
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
    return {
      workerId: spec.workerId,
      exited: proc.exited.then(async (code) => (await copied, code)),
      stop: () => proc.kill("SIGTERM"),
      kill: () => proc.kill("SIGKILL"),
      exitDetail: () => ({ signal: proc.signalCode ? String(proc.signalCode) : undefined, output: tail.text() }),
    };
  }

  #spawn(cmd: string[], spec: WorkerSpec) {
    return Bun.spawn(cmd, {
      env: {
        ...process.env,
        ...spec.env,
        SPOOL_API_KEY: spec.apiKey,
        [EXIT_WITH_PARENT_ENV]: "1", // a server killed with SIGKILL leaves no worker behind
        RUNPOD_WEBHOOK_GET_JOB: undefined,
        RUNPOD_POD_ID: undefined,
      },
      stdio: ["ignore", "inherit", "pipe"],
    });
  }
}
