import { constants } from "node:os";
import type { WatchedProcess } from "./owned-worker.ts";
import { childrenOf, groupGone, signalGroup } from "./process-tree.ts";
import { bubblewrapCommand, type SandboxSpec } from "./sandbox.ts";

/** How long a worker's leftover processes may take to die once it has exited and they were killed. */
const TREE_GONE_BOUND_MS = 5_000;

export interface LaunchOptions {
  env: Record<string, string | undefined>;
  /** The worker's error output: the owner's own, or a pipe it reads (`stderr` of the result). */
  stderr: "inherit" | "pipe";
  /** Run in a bubblewrap sandbox (PID namespace, read-only host, hidden paths); a process group otherwise. */
  sandbox?: SandboxSpec;
}

/** A worker process and everything it starts, owned as one. */
export interface LaunchedProcess extends WatchedProcess {
  /** The worker's exit code, once its whole process tree is gone (never on a pipe's end). */
  readonly exited: Promise<number>;
  /** After `exited`: the signal that ended the worker, if one did. */
  readonly signalCode: string | null;
  /** Its error output when `stderr` was "pipe". */
  readonly stderr: ReadableStream<Uint8Array> | undefined;
  /** Whether it runs in a sandbox. */
  readonly sandboxed: boolean;
  /** SIGKILL ends the whole tree at once; any other signal goes to the worker process itself. */
  kill(signal?: NodeJS.Signals | number): void;
}

const signalName = (n: number): string | null => Object.entries(constants.signals).find(([, v]) => v === n)?.[0] ?? null;

/**
 * Starts a worker process that an owner (the scaler's provider, a supervisor) watches: stdin for
 * stop lines, fd 3 for its reports. It runs in a session and process group of its own, so a
 * terminal's Ctrl-C reaches only the owner (which drains it) and a kill reaches every helper it
 * started. In a sandbox its tree is a PID namespace that dies with it and with its owner; without
 * one, the kernel still ends the worker when its owner dies (setpriv's parent-death signal).
 */
export function launchWorker(command: string[], options: LaunchOptions): LaunchedProcess {
  const sandboxed = options.sandbox !== undefined;
  const argv = sandboxed ? bubblewrapCommand(command, options.sandbox!) : withParentDeath(command);
  const proc = Bun.spawn(argv, {
    env: options.env,
    stdio: ["pipe", "inherit", options.stderr, "pipe"],
    detached: true,
  });
  const group = proc.pid;
  let signalCode: string | null = null;
  // Once the tree is gone its group id may be reused: nothing is signalled after that.
  let gone = false;
  const exited = proc.exited.then(async (code) => {
    // bwrap reports a worker killed by a signal as 128 + the signal; a process group's leftover
    // helpers are ended here, and the worker counts as gone only once they are.
    if (proc.signalCode) signalCode = String(proc.signalCode);
    else if (sandboxed && code > 128) signalCode = signalName(code - 128);
    if (signalGroup(group, "SIGKILL")) await groupGone(group, TREE_GONE_BOUND_MS);
    gone = true;
    return code;
  });
  return {
    pid: proc.pid,
    stdin: proc.stdin,
    stdio: proc.stdio,
    stderr: options.stderr === "pipe" ? (proc.stderr as ReadableStream<Uint8Array>) : undefined,
    sandboxed,
    exited,
    get signalCode() {
      return signalCode;
    },
    kill(signal: NodeJS.Signals | number = "SIGTERM") {
      if (gone) return;
      if (signal === "SIGKILL" || signal === 9) {
        signalGroup(group, "SIGKILL");
        proc.kill("SIGKILL");
        return;
      }
      if (!sandboxed) return void proc.kill(signal);
      // bwrap dies of a signal without passing it on; the worker is its grandchild (bwrap's
      // init in the namespace is in between). Not started yet: nothing to drain, end it all.
      const worker = childrenOf(childrenOf(proc.pid)[0] ?? -1)[0];
      if (worker === undefined) return this.kill("SIGKILL");
      try {
        process.kill(worker, signal);
      } catch {
        // already gone
      }
    },
  };
}

/** setpriv (util-linux): it asks the kernel to SIGKILL the worker when its owner dies, whatever the worker is doing. Looked up once. */
let setpriv: string | null | undefined;
const setprivPath = (): string | null => (setpriv ??= process.platform === "linux" ? Bun.which("setpriv") : null);

function withParentDeath(command: string[]): string[] {
  const path = setprivPath();
  return path ? [path, "--pdeathsig", "KILL", "--", ...command] : command;
}

/** Whether launched workers get the kernel's parent-death signal (else they watch their parent themselves). */
export const kernelEndsOrphans = (sandboxed: boolean): boolean => sandboxed || setprivPath() !== null;
