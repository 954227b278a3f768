import { Database } from "bun:sqlite";

/** An exclusive lock on a file, held until release() or the end of the process. */
export interface FileLock {
  release(): void;
}

/**
 * Takes the exclusive lock of `path` (created if missing), or returns undefined while another
 * holder has it. The lock is SQLite's on the file, which is the kernel's (fcntl on Unix,
 * LockFileEx on Windows): Bun has no flock, and this one goes with the process, so a holder
 * killed with SIGKILL frees it, and a second connection in the same process is refused like
 * another process. Errors other than the lock being held (a folder that cannot be written) throw.
 */
export function tryFileLock(path: string): FileLock | undefined {
  const db = new Database(path);
  try {
    db.run("PRAGMA locking_mode = EXCLUSIVE");
    db.run("BEGIN EXCLUSIVE");
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === "SQLITE_BUSY") return undefined;
    throw err;
  }
  return { release: () => db.close() };
}
