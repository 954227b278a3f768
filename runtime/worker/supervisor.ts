import type { Log } from "../log.ts";
import { isCompiled } from "../executable.ts";
import { EXIT_REPLACE, EXIT_START_PERMANENT } from "../protocol/exit-codes.ts";
import { CHILD_ENV, EXIT_WITH_PARENT_ENV, GENERATION_ENV } from "../protocol/worker-env.ts";
import { KILL_GRACE_DEFAULT_MS, KILL_GRACE_ENV } from "../protocol/worker-ipc.ts";
import { afterCrash } from "../process/crash-backoff.ts";
import { launchWorker, kernelEndsOrphans } from "../process/launch.ts";
import { OwnedWorker, watchEnv, type StopSource } from "../process/owned-worker.ts";

/**
 * Runs the worker in a child process and replaces it when it ends: at once when it asked to be
 * replaced (a handler stuck past its timeout, refresh_worker), with backoff after a crash. A job
 * past its deadline and grace, or cancelled and not ended within that grace, gets the child
 * terminated from here (OwnedWorker), since a handler that blocks the child's event loop also
 * blocks the child's own timer and stop channel; `stopsFor` takes a child's stop list for it.
 * SIGTERM/SIGINT are passed on and end supervision once the child has drained.
 */
export async function supervise(
  command: string[],
  env: Record<string, string | undefined>,
  log: Log,
  stopsFor?: (workerId: string) => StopSource,
): Promise<number> {
  let stopping = false;
  const stopped = new AbortController();
  let child: { kill(sig: NodeJS.Signals): void } | undefined;
  const forward = (sig: NodeJS.Signals) => () => {
    stopping = true;
    stopped.abort();
    child?.kill(sig);
  };
  process.on("SIGTERM", forward("SIGTERM"));
  process.on("SIGINT", forward("SIGINT"));
  const killGraceMs = Number(env[KILL_GRACE_ENV] ?? KILL_GRACE_DEFAULT_MS);
  let crashes = 0;
  for (let generation = 1; !stopping; generation++) {
    // Each replacement gets a worker id of its own (GENERATION_ENV), so the jobs of the process
    // that ended follow the worker-loss rule instead of waiting out their execution timeout.
    const proc = launchWorker(command, {
      // A child whose supervisor is gone would run on with nobody to enforce its deadlines or relay
      // its cancels: the kernel ends it (or, where it cannot, the child watches for it), and its
      // jobs follow the worker-loss rule.
      env: {
        ...env,
        ...watchEnv(stopsFor !== undefined),
        [CHILD_ENV]: "1",
        [GENERATION_ENV]: String(generation),
        [EXIT_WITH_PARENT_ENV]: kernelEndsOrphans(false) ? undefined : "1",
      },
      stderr: "inherit",
    });
    child = proc;
    const startedAt = performance.now();
    const { watchdog } = new OwnedWorker(proc, { killGraceMs, log, stopsFor });
    const code = await proc.exited;
    if (stopping) return code;
    if (code === 0) return 0;
    // The handler cannot be loaded (or its setup said so): another start would fail the same way.
    if (code === EXIT_START_PERMANENT) {
      log.error("the worker cannot start and a restart would not change that; stopping", { code });
      return code;
    }
    if (code === EXIT_REPLACE || watchdog.fired) {
      crashes = 0;
      log.info("replacing the worker process", { code });
      continue;
    }
    const { crashes: inRow, waitMs: wait } = afterCrash(crashes, performance.now() - startedAt);
    crashes = inRow;
    log.warn("worker process crashed; restarting", { code, inMs: wait });
    // Told to stop meanwhile: no new child.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, wait);
      stopped.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
    });
  }
  return 0;
}

/** How this program starts itself again: a compiled binary is its own executable. */
export function selfCommand(args: string[]): string[] {
  return isCompiled() ? [process.execPath, ...args] : [process.execPath, Bun.main, ...args];
}
