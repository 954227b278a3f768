import { readdirSync, readFileSync } from "node:fs";

/** The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp. */
function stat(pid: number): { state: string; ppid: number; pgrp: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is in parentheses and may itself hold spaces or parentheses.
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: rest[0]!, ppid: Number(rest[1]), pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

/** Whether a process exists and has not yet exited (a zombie waiting to be reaped has). */
export function alive(pid: number): boolean {
  const s = stat(pid);
  return s !== undefined && s.state !== "Z" && s.state !== "X";
}

/** The live processes of a process group, read from /proc (empty where /proc is missing). */
export function groupMembers(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const members: number[] = [];
  for (const name of entries) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const s = stat(pid);
    if (s && s.pgrp === pgid && s.state !== "Z" && s.state !== "X") members.push(pid);
  }
  return members;
}

/** A process's direct children (Linux: /proc/<pid>/task/<pid>/children). */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Sends a signal to a whole process group; false when none of it is left. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves once no live process is left in the group, or after `boundMs` (a process stuck in the
 * kernel, in uninterruptible sleep, cannot be waited for without bound). Checked every 20 ms:
 * the kernel gives no event for a group becoming empty.
 */
export async function groupGone(pgid: number, boundMs: number): Promise<boolean> {
  const until = Date.now() + boundMs;
  for (;;) {
    if (groupMembers(pgid).length === 0) return true;
    if (Date.now() >= until) return false;
    await Bun.sleep(20);
  }
}
