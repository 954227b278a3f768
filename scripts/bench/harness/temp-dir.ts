import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh directory under the system temp dir, named `prefix` plus a random suffix. */
export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Removes a directory and everything in it; one already gone is no error. */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
