/** Resolves true once `proc` has exited, false if it is still running after `ms`. */
export const exitedWithin = (proc: Bun.Subprocess, ms: number): Promise<boolean> =>
  Promise.race([proc.exited.then(() => true), Bun.sleep(ms).then(() => false)]);

const running = (proc: Bun.Subprocess) => proc.exitCode === null && proc.signalCode === null;

/** True while any process of the group `pgid` is still alive. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Sends `sig` to every process of the group `pgid`; a group already gone is no error. */
export function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {}
}

/** SIGTERM, then SIGKILL after `killAfterMs`; resolves once the process has exited. */
export async function stopProcess(proc: Bun.Subprocess, killAfterMs: number): Promise<void> {
  if (!running(proc)) return;
  proc.kill("SIGTERM");
  if (!(await exitedWithin(proc, killAfterMs))) {
    proc.kill("SIGKILL");
    await proc.exited;
  }
}

/** How a process group was stopped. */
export interface GroupStop {
  /** ms from the call until the group leader had exited. */
  exitMs: number;
  /** SIGKILLs it took (0 when SIGTERM was enough). */
  forcedKills: number;
}

/**
 * Stops a process spawned with `detached: true` (so its pid is the id of a group holding its
 * children too): SIGTERM to the leader, SIGKILL to the whole group after `killAfterMs`; then waits,
 * polling every `pollMs`, until no process of the group is left, with SIGKILL again past
 * `killAfterMs`. Throws if the group survives that.
 */
export async function stopGroup(
  proc: Bun.Subprocess,
  opts: { killAfterMs: number; pollMs: number; afterKillMs: number; label?: string },
): Promise<GroupStop> {
  const t = performance.now();
  const pgid = proc.pid;
  let forcedKills = 0;
  if (running(proc)) {
    proc.kill("SIGTERM");
    if (!(await exitedWithin(proc, opts.killAfterMs))) {
      forcedKills++;
      killGroup(pgid, "SIGKILL");
      await proc.exited;
    }
  }
  const exitMs = performance.now() - t;
  const deadline = performance.now() + opts.killAfterMs;
  while (groupAlive(pgid)) {
    if (performance.now() > deadline) {
      forcedKills++;
      killGroup(pgid, "SIGKILL");
      await Bun.sleep(opts.afterKillMs);
      if (groupAlive(pgid)) throw new Error(`${opts.label ? `${opts.label}: ` : ""}process group ${pgid} survived SIGKILL`);
      break;
    }
    await Bun.sleep(opts.pollMs);
  }
  return { exitMs, forcedKills };
}
