import { parseArgs } from "node:util";
import { systemClock } from "../clock.ts";
import { stderrLog } from "../log.ts";
import type { Handler } from "../../sdk/define-handler.ts";
import { handlerOptions } from "./handler-options.ts";
import { localInput, runOnce } from "./run-once.ts";
import { CHILD_ENV, EXIT_WITH_PARENT_ENV } from "../protocol/worker-env.ts";
import { ownerLink } from "./owner-link.ts";
import { cannotStart, isPermanentStartError } from "./start-failure.ts";
import { selfCommand, supervise } from "./supervisor.ts";
import { WorkerApi } from "./worker-api.ts";
import { WorkerLoop } from "./worker-loop.ts";
import { OutputCapture } from "./output-capture.ts";
import { workerOptions } from "./worker-options.ts";
import { workerEndpoints } from "./worker-urls.ts";
import { startTracing, stopTracing } from "../telemetry/tracing.ts";

export const WORKER_FLAGS = {
  url: { type: "string" },
  endpoint: { type: "string" },
  "api-key": { type: "string" },
  "worker-id": { type: "string" },
  input: { type: "string" },
  "no-supervise": { type: "boolean" },
} as const;

/**
 * Entry of a worker: `spool worker <handler>` and every binary from `spool build` come here.
 * With --input, or with no server configured at all, it runs one job locally and exits (as
 * runpod-python does); otherwise it supervises a child process that runs the poll loop.
 * `relaunch` are the arguments that start this same worker again (for the child).
 */
export async function workerMain(handler: Handler, argv: string[], relaunch: string[], env = process.env): Promise<number> {
  const { values: flags } = parseArgs({ args: argv, options: WORKER_FLAGS, allowPositionals: false });
  const log = stderrLog;
  const hasServer = Boolean(flags.url || env.RUNPOD_WEBHOOK_GET_JOB);
  const local = flags.input !== undefined || !hasServer;
  let options: unknown;
  try {
    options = handlerOptions(handler, env); // bad settings stop the worker here, clearly
  } catch (err) {
    if (local) throw err;
    return cannotStart(err);
  }

  if (local) {
    const outcome = await runOnce(handler, await localInput(flags.input), log, options);
    if (outcome.kind === "output") {
      try {
        console.log(JSON.stringify(outcome.output, null, 2));
        return 0;
      } catch (err) {
        console.error(`job failed: the handler's result cannot be sent as JSON: ${(err as Error).message}`);
        return 1;
      }
    }
    console.error(outcome.kind === "error" ? `job failed: ${outcome.error}` : "job stopped");
    return 1;
  }

  const settings = workerOptions(flags, env);
  const apiFor = (workerId: string) =>
    new WorkerApi(workerEndpoints(settings.urls, workerId), settings.apiKey, systemClock, log, {
      requestMs: settings.requestTimeoutMs,
      longPollMs: settings.longPollTimeoutMs,
    });
  if (!flags["no-supervise"] && env[CHILD_ENV] !== "1") {
    // The supervisor takes each child's stop list over HTTP, as the child would (see OwnedWorker).
    const stopsFor = (workerId: string) => {
      const api = apiFor(workerId);
      return (signal: AbortSignal) => api.stops(signal);
    };
    return supervise(selfCommand(relaunch), env, log, stopsFor);
  }

  const api = apiFor(settings.workerId);
  // Before the first take: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT turns traces on (the server passes OTEL_* to its workers).
  await startTracing({ service: "spool-worker", resource: { "spool.worker.id": settings.workerId }, log, env });
  // What the handler prints goes to its job's log too (GET /logs), while it runs alone.
  const capture = new OutputCapture();
  capture.install();
  const loop = new WorkerLoop({
    handler,
    api,
    workerId: settings.workerId,
    clock: systemClock,
    log,
    pingIntervalMs: settings.pingIntervalMs,
    timeoutGraceMs: settings.timeoutGraceMs,
    drainTimeoutMs: settings.drainTimeoutMs,
    exitWhenIdleMs: settings.exitWhenIdleMs,
    // A hung handler's process ends: the spans it has are sent first.
    exit: (code) => void stopTracing().finally(() => process.exit(code)),
    handlerOptions: options,
    // Present when an owner (supervisor, scaler) watches: it enforces deadlines and cancels from outside.
    owner: ownerLink(env, () => Bun.stdin.stream()),
    capture,
  });
  process.on("SIGTERM", () => loop.shutdown(0));
  process.on("SIGINT", () => loop.shutdown(0));
  if (env[EXIT_WITH_PARENT_ENV] === "1") exitWithParent(log);
  try {
    return await loop.run();
  } catch (err) {
    if (isPermanentStartError(err)) return cannotStart(err); // thrown by setup(): see PermanentStartError
    throw err;
  } finally {
    await stopTracing();
  }
}

function exitWithParent(log: { warn: (m: string) => void }): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) {
      log.warn("the process that started this worker (a server or a supervisor) is gone; exiting");
      process.exit(1);
    }
  }, 1_000).unref();
}
