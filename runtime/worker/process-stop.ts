import { writeSync } from "node:fs";
import type { Log } from "../log.ts";
import { isWorkerIpcMessage, WATCH_FD, WATCH_FD_ENV, type WorkerIpcMessage } from "../protocol/worker-ipc.ts";

export interface OwnedProcess {
  readonly pid: number;
  readonly exited: Promise<number>;
  kill(signal?: NodeJS.Signals | number): void;
}

/**
 * SIGTERM now, SIGKILL after `graceMs` if the process is still there: a worker whose event loop
 * is stuck never runs its SIGTERM handler, so only the second signal ends it.
 */
export function terminate(proc: OwnedProcess, graceMs: number): void {
  let gone = false;
  void proc.exited.then(() => (gone = true));
  proc.kill("SIGTERM");
  const timer = setTimeout(() => gone || proc.kill("SIGKILL"), graceMs);
  void proc.exited.then(() => clearTimeout(timer));
}

/**
 * Enforces job deadlines from outside a worker process: the worker reports each job it starts
 * and ends (WorkerIpcMessage); a job still running at its timeout plus the worker's own grace
 * gets the process terminated, whatever its handler is doing.
 */
export class JobWatchdog {
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  /** Jobs past their timeout and not reported ended. */
  readonly #overdue = new Set<string>();
  #fired = false;

  constructor(
    private readonly proc: OwnedProcess,
    private readonly killGraceMs: number,
    private readonly log: Log,
  ) {
    void proc.exited.then(() => this.#clear());
  }

  /** True once the watchdog ended the process: its exit is a replacement, not a crash. */
  get fired(): boolean {
    return this.#fired;
  }

  /** True while a job runs past its timeout: the process is about to be ended, not idle. */
  get overdue(): boolean {
    return this.#fired || this.#overdue.size > 0;
  }

  /** Feed every IPC message of the process here. */
  message = (m: unknown): void => {
    if (!isWorkerIpcMessage(m)) return;
    clearTimeout(this.#timers.get(m.jobId));
    this.#timers.delete(m.jobId);
    this.#overdue.delete(m.jobId);
    if (m.type === "job-end") return;
    const timer = setTimeout(() => {
      this.#overdue.add(m.jobId);
      this.#timers.set(m.jobId, setTimeout(() => this.#end(m.jobId), m.graceMs));
    }, m.timeoutMs);
    this.#timers.set(m.jobId, timer);
  };

  #end(jobId: string): void {
    if (this.#fired) return;
    this.#fired = true;
    this.log.error("a job ran past its timeout and grace; terminating its worker process", { jobId, pid: this.proc.pid, killGraceMs: this.killGraceMs });
    terminate(this.proc, this.killGraceMs);
  }

  #clear(): void {
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }
}

/** Spawn options for a worker process an owner watches: the extra descriptor and its env. */
export const watchedStdio = (stdin: "ignore" | "inherit") => [stdin, "inherit", "inherit", "pipe"] as const;
export const watchEnv = { [WATCH_FD_ENV]: String(WATCH_FD) };

/** Feeds each line the worker writes on its watch descriptor to `onMessage`. */
export async function readWatchLines(fd: unknown, onMessage: (m: unknown) => void): Promise<void> {
  if (typeof fd !== "number") return;
  let buf = "";
  const decoder = new TextDecoder();
  try {
    for await (const bytes of Bun.file(fd).stream()) {
      buf += decoder.decode(bytes, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const line of lines) {
        try {
          onMessage(JSON.parse(line));
        } catch {
          // not a message: ignored
        }
      }
    }
  } catch {
    // the process is gone
  }
}

/** The worker's side: a synchronous writer to its owner's descriptor, or none when unwatched. */
export function reporter(env: Record<string, string | undefined>): ((m: WorkerIpcMessage) => void) | undefined {
  const fd = Number(env[WATCH_FD_ENV]);
  if (!Number.isInteger(fd) || fd < 3) return undefined;
  return (m) => {
    try {
      writeSync(fd, `${JSON.stringify(m)}\n`);
    } catch {
      // the owner is gone: nothing to tell
    }
  };
}
