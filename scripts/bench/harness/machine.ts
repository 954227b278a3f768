import { readFileSync } from "node:fs";
import { cpus } from "node:os";

/** What a benchmark reports about the machine it ran on. */
export interface Machine {
  /** `nproc` (CPUs this process may use), else navigator.hardwareConcurrency. */
  nproc: string;
  /** CPUs the OS lists (os.cpus().length). */
  cores: number;
  cpu: string;
  /** Bun's version and revision. */
  bun: string;
  /** e.g. linux-x64. */
  platform: string;
  /** Total memory in GiB; undefined where /proc/meminfo is not there. */
  ramGiB?: number;
  /** The 1, 5 and 15 minute load averages; undefined where /proc/loadavg is not there. */
  load?: string;
}

/** Reads the machine facts (nproc, CPU model, memory, load, bun version, platform). */
export function machine(): Machine {
  let nproc = String(navigator.hardwareConcurrency);
  try {
    const p = Bun.spawnSync(["nproc"]);
    if (p.exitCode === 0) nproc = p.stdout.toString().trim();
  } catch {}
  let ramGiB: number | undefined;
  try {
    ramGiB = Math.round(Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]) / 1024 / 1024);
  } catch {}
  let load: string | undefined;
  try {
    load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {}
  return {
    nproc,
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? "unknown CPU",
    bun: `${Bun.version} (${Bun.revision.slice(0, 9)})`,
    platform: `${process.platform}-${process.arch}`,
    ramGiB,
    load,
  };
}

/** One line: nproc, [memory,] CPU, bun, platform[, load average at start]. */
export function machineLine(m: Machine, opts: { ram?: boolean; load?: boolean } = {}): string {
  const ram = opts.ram && m.ramGiB !== undefined ? ` ${m.ramGiB} GiB RAM,` : "";
  const load = opts.load && m.load !== undefined ? `, load average ${m.load} at start` : "";
  return `nproc ${m.nproc},${ram} ${m.cpu}, bun ${m.bun}, ${m.platform}${load}`;
}
