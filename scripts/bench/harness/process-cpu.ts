import { readFileSync } from "node:fs";

/** CPU seconds (user + system) a child process has used; NaN where /proc is not there. */
export function processCpu(pid: number): number {
  try {
    // Fields after the ")" that ends the command name: state is 3rd, utime 14th, stime 15th.
    const rest = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ").pop()!.split(" ");
    return (Number(rest[11]) + Number(rest[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return NaN;
  }
}

/** CPU seconds (user + system) this process has used. */
export function ownCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}
