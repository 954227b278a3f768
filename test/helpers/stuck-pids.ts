import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alive as running } from "../../runtime/process/process-tree.ts";
import type { TestServer } from "./test-server.ts";
import { until } from "./until.ts";

/** True while a process with this id exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Worker processes of one test, found from outside whatever namespace they run in: those whose
 * environment holds STUCK_PIDS_DIR=<dir> (give the workers `env`), as the host numbers them.
 */
export interface StuckPids extends Disposable {
  dir: string;
  /** The variable to put in the workers' environment (an endpoint's `env`, or a spawn's). */
  env: { STUCK_PIDS_DIR: string };
  /** Live processes with that variable, less `except` (a supervisor has it too) and bubblewrap's own. */
  live(except?: number[]): number[];
}

/** Whether a live process (not a zombie) has `entry` in the environment it was started with, and is not bwrap. */
function startedWith(pid: number, entry: string): boolean {
  try {
    if (!running(pid) || readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "bwrap") return false;
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(entry);
  } catch {
    return false;
  }
}

export function stuckPids(): StuckPids {
  const dir = mkdtempSync(join(tmpdir(), "spool-stuck-"));
  const entry = `STUCK_PIDS_DIR=${dir}`;
  return {
    dir,
    env: { STUCK_PIDS_DIR: dir },
    live: (except = []) =>
      readdirSync("/proc")
        .map(Number)
        .filter((pid) => Number.isInteger(pid) && pid > 0 && pid !== process.pid && !except.includes(pid) && startedWith(pid, entry)),
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** What a test saw while a stuck worker process was being ended. */
export interface StuckWatch {
  /** The most worker processes alive at once. */
  maxAlive: number;
  /** What /health called the endpoint's workers (idle, stopping, other) while the process was alive, after `label()`. */
  shown: Set<string>;
}

/** Polls until `pid` is gone, reading the live processes and /health at every turn. */
export async function watchUntilGone(
  srv: TestServer,
  endpoint: string,
  pid: number,
  live: () => number[],
  label: () => Promise<string> = async () => "",
): Promise<StuckWatch> {
  let maxAlive = 0;
  const shown = new Set<string>();
  await until(
    async () => {
      maxAlive = Math.max(maxAlive, live().length);
      const [, h] = await srv.json("GET", `/v2/${endpoint}/health`);
      const prefix = await label();
      const stuck = alive(pid);
      if (stuck) shown.add(`${prefix}${h.workers.idle > 0 ? "idle" : (h.workers.stopping ?? 0) > 0 ? "stopping" : "other"}`);
      return !stuck;
    },
    "the stuck process to end",
    60_000,
  );
  return { maxAlive, shown };
}
