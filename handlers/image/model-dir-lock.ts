import {
  closeSync,
  linkSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Clock } from "../../runtime/clock.ts";

const LOCK = ".spool-download.lock";
/** How often a waiting process looks at the lock and the completion marker. */
export const LOCK_POLL_MS = 250;
const BEAT_EVERY_MS = 1000;
const wallClock: Pick<Clock, "now" | "sleep"> = { now: () => Date.now(), sleep: (ms) => Bun.sleep(ms) };

interface Holder {
  pid: number;
  host: string;
  token: string;
  /** The holder's start time (see startTicks), to tell it from a later process given the same pid. */
  started?: string;
  /** The holder's pid namespace and boot: its pid means something only where both are ours. */
  ns?: string;
  boot?: string;
}

/** The lock of one download, held: `beat()` shows progress to waiters, `release()` ends it. */
export interface HeldLock {
  beat(): void;
  release(): void;
}

export interface LockOptions {
  /** True once the model is complete (then waiting ends without taking the lock). */
  complete: () => boolean;
  /** Gives up waiting after this long without the holder showing progress. */
  stallMs: number;
  /** @default the wall clock */
  clock?: Clock;
  /** Told once that this process waits, and for whom. */
  out: { write(text: string): unknown };
  label: string;
}

/**
 * Takes the download lock of model folder `dir` (`.spool-download.lock`, created exclusively,
 * holding pid, start time, host and a token), or waits while another process holds it: until the model is
 * complete (returns undefined), the lock is released (takes it), or its holder is dead (takes it
 * over). The holder touches the lock as bytes arrive; a waiter that sees no change for `stallMs`
 * fails with an error naming the holder and the lock file.
 */
export async function lockModelDir(dir: string, options: LockOptions): Promise<HeldLock | undefined> {
  const clock = options.clock ?? wallClock;
  const path = join(dir, LOCK);
  const mine: Holder = {
    pid: process.pid,
    host: hostname(),
    token: crypto.randomUUID(),
    started: startTicks(process.pid),
    ns: PID_NAMESPACE,
    boot: BOOT_ID,
  };
  let seen = "";
  let since = clock.now();
  let told = false;
  for (;;) {
    if (options.complete()) return undefined;
    if (create(path, mine)) {
      const lock = held(path, mine, clock);
      if (!options.complete()) return lock;
      lock.release(); // finished by the holder just before it let go
      return undefined;
    }
    const current = read(path);
    if (!current) continue; // released just now: try again
    const { holder, text, mtimeMs } = current;
    // A holder seen from here (same host, pid namespace and boot) that is gone; or a lock nobody
    // has touched for stallMs before this process even looked (left by a crash elsewhere).
    const abandoned = seen === "" && Date.now() - mtimeMs >= options.stallMs;
    if ((holder && sameMachine(holder, mine) && !alive(holder)) || abandoned) {
      takeOver(path, text);
      continue;
    }
    if (`${text}@${mtimeMs}` !== seen) {
      seen = `${text}@${mtimeMs}`;
      since = clock.now();
    } else if (clock.now() - since >= options.stallMs) {
      const who = holder ? `process ${holder.pid} on ${holder.host}` : "another process";
      throw new Error(
        `${options.label}: ${who} holds ${path} but has shown no progress for ${Math.round(options.stallMs / 1000)} s; stop it, or delete that file if no process is downloading, and start again`,
      );
    }
    if (!told) {
      told = true;
      options.out.write(
        `${options.label}: waiting for ${holder ? `process ${holder.pid}` : "another process"}, which is downloading it into ${dir}\n`,
      );
    }
    await clock.sleep(LOCK_POLL_MS);
  }
}

/**
 * Creates the lock with its whole content at once (a link fails when the name exists, like
 * O_EXCL); on a file system without hard links (some FUSE mounts), an exclusive create, whose
 * content a waiter may see empty for an instant (it then waits as on any lock it cannot read).
 */
function create(path: string, mine: Holder): boolean {
  const tmp = `${path}.${mine.token}`;
  writeFileSync(tmp, JSON.stringify(mine));
  try {
    linkSync(tmp, path);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw err;
    return createExclusive(path, mine);
  } finally {
    unlinkSync(tmp);
  }
}

function createExclusive(path: string, mine: Holder): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    writeSync(fd, JSON.stringify(mine));
  } finally {
    closeSync(fd);
  }
  return true;
}

/** This process's pid namespace and boot (Linux), so pids are compared only where they mean the same process. */
const PID_NAMESPACE = readOr(() => readlinkSync("/proc/self/ns/pid"));
const BOOT_ID = readOr(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());

function readOr(read: () => string): string | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** Whether the holder's pid can be checked from here: same host, pid namespace and boot. */
function sameMachine(holder: Holder, mine: Holder): boolean {
  return (
    holder.host === mine.host && holder.ns !== undefined && holder.ns === mine.ns && holder.boot !== undefined && holder.boot === mine.boot
  );
}

function read(path: string): { holder: Holder | undefined; text: string; mtimeMs: number } | undefined {
  try {
    const text = readFileSync(path, "utf8");
    const mtimeMs = statSync(path).mtimeMs;
    let holder: Holder | undefined;
    try {
      const parsed = JSON.parse(text) as Partial<Holder>;
      if (
        typeof parsed.pid === "number" &&
        typeof parsed.host === "string" &&
        typeof parsed.token === "string" &&
        (parsed.started === undefined || typeof parsed.started === "string")
      ) {
        holder = parsed as Holder;
      }
    } catch {
      // not a lock this code wrote: wait on it like any other, bounded by stallMs
    }
    return { holder, text, mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * Whether the holder of a lock still runs. A process with its pid that started at another time
 * is a different one that got the number again (common in containers, where a restarted worker
 * gets the same small pid).
 */
function alive(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false; // EPERM: alive, another user's
  }
  return holder.started === undefined || startTicks(holder.pid) === holder.started;
}

/** When process `pid` started, in clock ticks since boot (Linux /proc), or undefined where unreadable. */
function startTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]; // field 22, starttime
  } catch {
    return undefined;
  }
}

/**
 * Removes a dead holder's lock. Two waiters can judge the same lock dead; the one that moves it
 * second may have moved the first one's fresh lock instead, so it checks what it moved and puts
 * a lock that is not the dead one back (a link, which never replaces a lock created meanwhile).
 * Only a third process creating a lock in the instant between that move and the link could
 * still get in beside the first.
 */
function takeOver(path: string, deadText: string): void {
  const aside = `${path}.dead-${process.pid}-${crypto.randomUUID()}`;
  try {
    renameSync(path, aside);
  } catch {
    return; // gone already
  }
  try {
    if (readFileSync(aside, "utf8") !== deadText) linkSync(aside, path);
  } catch {
    // a new lock exists already: it stays
  } finally {
    unlinkSync(aside);
  }
}

function held(path: string, mine: Holder, clock: Pick<Clock, "now">): HeldLock {
  const text = JSON.stringify(mine);
  let beatAt = clock.now();
  const ours = () => {
    try {
      return readFileSync(path, "utf8") === text;
    } catch {
      return false;
    }
  };
  return {
    beat() {
      if (clock.now() - beatAt < BEAT_EVERY_MS) return;
      beatAt = clock.now();
      try {
        const now = new Date();
        utimesSync(path, now, now);
      } catch {
        // a waiter that sees no beat gives up after stallMs and says why
      }
    },
    release() {
      if (ours()) unlinkSync(path);
    },
  };
}
