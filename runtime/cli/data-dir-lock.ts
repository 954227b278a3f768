import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../config/config.ts";
import { tryFileLock } from "../file-lock.ts";

/** The lock file (an SQLite file held in an exclusive transaction) and the holder's pid beside it. */
const LOCK_FILE = "serve.lock";
const PID_FILE = "serve.pid";

/**
 * Takes the exclusive lock of a data directory for one server, or throws a ConfigError naming the
 * server that holds it. The lock is the kernel's (tryFileLock): it goes with the process, so a
 * killed server never blocks its own restart, and it works the same in a compiled binary.
 * `spool keys` and `spool usage` do not take it.
 */
export function lockDataDir(dir: string): { release(): void } {
  mkdirSync(dir, { recursive: true });
  const lock = tryFileLock(join(dir, LOCK_FILE));
  if (!lock)
    throw new ConfigError(
      `data directory ${dir} is in use by another spool serve (pid ${holderPid(dir)}): stop it, or give this one its own --data`,
    );
  writeFileSync(join(dir, PID_FILE), `${process.pid}\n`);
  return lock;
}

function holderPid(dir: string): string {
  try {
    return readFileSync(join(dir, PID_FILE), "utf8").trim() || "unknown";
  } catch {
    return "unknown";
  }
}
