import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

/** A folder where test/fixtures/stuck-fixture.ts processes leave their pids (STUCK_PIDS_DIR). */
export interface StuckPids extends Disposable {
  dir: string;
  /** Live processes that loaded the fixture, less `except` (a supervisor, the server: they load it too). */
  live(except?: number[]): number[];
}

export function stuckPids(): StuckPids {
  const dir = mkdtempSync(join(tmpdir(), "spool-stuck-"));
  return {
    dir,
    live: (except = []) => readdirSync(dir).map(Number).filter((pid) => !except.includes(pid) && alive(pid)),
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
export async function watchUntilGone(srv: TestServer, endpoint: string, pid: number, live: () => number[], label: () => Promise<string> = async () => ""): Promise<StuckWatch> {
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
