import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
