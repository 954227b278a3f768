import { resolve } from "node:path";
import { isHandlerSource } from "../../build/executable.ts";
import { EXIT_WITH_PARENT_ENV } from "../../protocol/worker-env.ts";
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
    const proc = Bun.spawn(cmd, {
      env: {
        ...process.env,
        ...spec.env,
        SPOOL_API_KEY: spec.apiKey,
        [EXIT_WITH_PARENT_ENV]: "1", // a server killed with SIGKILL leaves no worker behind
        RUNPOD_WEBHOOK_GET_JOB: undefined,
        RUNPOD_POD_ID: undefined,
      },
      stdio: ["ignore", "inherit", "inherit"],
    });
    return {
      workerId: spec.workerId,
      exited: proc.exited,
      stop: () => proc.kill("SIGTERM"),
      kill: () => proc.kill("SIGKILL"),
    };
  }
}
