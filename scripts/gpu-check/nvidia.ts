/** What nvidia-smi says about the processes on each GPU, for the GPU check. */

/** nvidia-smi's CSV lines; none when it is missing or fails (a rehearsal on a CPU host). */
const query = (args: string[]): string[] => {
  try {
    const r = Bun.spawnSync(["nvidia-smi", ...args, "--format=csv,noheader,nounits"], { stdout: "pipe", stderr: "pipe" });
    return r.exitCode === 0
      ? r.stdout
          .toString()
          .split("\n")
          .map((l) => l.trim())
          .filter(Boolean)
      : [];
  } catch {
    return [];
  }
};

/** The processes that hold GPU memory now: pid, GPU UUID (as workers are given theirs), MiB. */
export function computeApps(): { pid: number; gpu: string; usedMb: number }[] {
  return query(["--query-compute-apps=pid,gpu_uuid,used_memory"]).map((l) => {
    const [pid, uuid, used] = l.split(",").map((s) => s.trim());
    return { pid: Number(pid), gpu: uuid!, usedMb: Number(used) };
  });
}

/**
 * The processes in plain `nvidia-smi`'s table: graphics and Vulkan contexts ("G", "C+G") as well
 * as compute ones, which the compute-apps query leaves out. GPU by index.
 */
export function parseProcessTable(text: string): { pid: number; gpu: string; usedMb: number; type: string }[] {
  const apps: { pid: number; gpu: string; usedMb: number; type: string }[] = [];
  for (const line of text.split("\n")) {
    const m = /^\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(C\+G|C|G)\s+.*?\s(\d+)MiB\s*\|$/.exec(line);
    if (m) apps.push({ gpu: `GPU ${m[1]}`, pid: Number(m[2]), type: m[3]!, usedMb: Number(m[4]) });
  }
  return apps;
}

/** parseProcessTable of `nvidia-smi` now; none when it is missing or fails. */
export function tableApps(): ReturnType<typeof parseProcessTable> {
  try {
    const r = Bun.spawnSync(["nvidia-smi"], { stdout: "pipe", stderr: "pipe" });
    return r.exitCode === 0 ? parseProcessTable(r.stdout.toString()) : [];
  } catch {
    return [];
  }
}

/** The pid of each worker process (`--worker-id <id>` on its command line), from ps. */
export function workerPids(): Map<string, number> {
  const r = Bun.spawnSync(["ps", "-eo", "pid=,args="], { stdout: "pipe" });
  const pids = new Map<string, number>();
  for (const line of r.stdout.toString().split("\n")) {
    const m = /^\s*(\d+)\s.*--worker-id\s+(\S+)/.exec(line);
    if (m) pids.set(m[2]!, Number(m[1]));
  }
  return pids;
}

/** The process and its descendants (a built binary may run its work in a child). */
export function withChildren(pid: number): number[] {
  const r = Bun.spawnSync(["ps", "-eo", "pid=,ppid="], { stdout: "pipe" });
  const children = new Map<number, number[]>();
  for (const line of r.stdout.toString().trim().split("\n")) {
    const [p, pp] = line.trim().split(/\s+/).map(Number);
    children.set(pp!, [...(children.get(pp!) ?? []), p!]);
  }
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...(children.get(all[i]!) ?? []));
  return all;
}

/** One card's memory now, as nvidia-smi reports it. */
export interface CardMemory {
  index: string;
  name: string;
  usedMb: number;
  totalMb: number;
}

/** Every card's memory in use now; none when nvidia-smi is missing or fails. */
export function cardMemory(): CardMemory[] {
  return query(["--query-gpu=index,name,memory.used,memory.total"]).map((l) => {
    const [index, name, used, total] = l.split(",").map((s) => s.trim());
    return { index: index!, name: name!, usedMb: Number(used), totalMb: Number(total) };
  });
}
