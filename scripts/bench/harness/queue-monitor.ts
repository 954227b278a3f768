import { join } from "node:path";
import { SCRIPT_SOURCES } from "../../../runtime/server/store/redis/redis-lua.ts";
import { drain } from "./pipes.ts";
import type { RedisProcess } from "./redis-process.ts";
import type { Probe, Throughput } from "./queue-timing.ts";

const sha1 = (text: string) => new Bun.CryptoHasher("sha1").update(text).digest("hex");

/** Names Spool's and BullMQ's scripts by the SHA1 that EVALSHA sends (for the MONITOR breakdown). */
async function scriptNames(baseline?: string): Promise<Map<string, string>> {
  const names = new Map(Object.entries(SCRIPT_SOURCES).map(([name, src]) => [sha1(src), name]));
  if (baseline) {
    // Another checkout's scripts (--baseline) are named too, where they differ from these.
    const other = (await import(join(baseline, "runtime/server/store/redis/redis-lua.ts"))) as { SCRIPT_SOURCES: Record<string, string> };
    for (const [name, src] of Object.entries(other.SCRIPT_SOURCES)) if (!names.has(sha1(src))) names.set(sha1(src), name);
  }
  try {
    const bull = (await import("bullmq/dist/esm/scripts/index.js")) as Record<string, { name?: string; content?: string }>;
    for (const s of Object.values(bull)) if (s?.name && s.content) names.set(sha1(s.content), `bullmq ${s.name}`);
  } catch {
    // A BullMQ of another layout: its scripts show as "sha <prefix>".
  }
  return names;
}

/** Redis commands counted under MONITOR between a probe's begin and end. */
export interface CommandCounts {
  /** Commands sent by clients (one round trip each), by command (EVALSHA by script name). */
  topLevel: Map<string, number>;
  /** Commands run inside Lua scripts and functions, by command. */
  inScripts: Map<string, number>;
}

/**
 * `redis-cli monitor`, counting between an ECHO marker sent by begin() and one sent by end().
 * Ours are the only ECHOs, so the window is exact; MONITOR slows Redis, so this pass is untimed.
 */
async function startMonitor(
  redis: RedisProcess,
  baseline?: string,
): Promise<{ monitor: CommandCounts & Probe; stop: () => Promise<void> }> {
  const names = await scriptNames(baseline);
  const proc = Bun.spawn(["redis-cli", "-p", String(redis.port), "monitor"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const topLevel = new Map<string, number>();
  const inScripts = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  let counting = false;
  const seen = new Map<string, () => void>();
  let buf = "";
  const lines = drain(proc.stdout, (s) => {
    buf += s;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    for (const line of parts) {
      if (line.trim() === "OK") seen.get("OK")?.();
      // 1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "sha" ...   or   [0 lua] "HSET" ...
      const m = /^\S+ \[\d+ ([^\]]+)\] "([^"]+)"(?: "([^"]*)")?/.exec(line);
      if (!m) continue;
      const [, from, rawCmd, arg1] = m;
      const cmd = rawCmd!.toUpperCase();
      if (cmd === "ECHO" && arg1?.startsWith("bench-monitor-")) {
        seen.get(arg1)?.();
        continue;
      }
      // INFO is the benchmark's own reading of CPU and command counts (Spool never sends it).
      if (!counting || cmd === "INFO") continue;
      if (from === "lua") add(inScripts, cmd);
      else if (cmd === "EVALSHA") add(topLevel, `EVALSHA ${names.get(arg1 ?? "") ?? "sha " + (arg1 ?? "").slice(0, 8)}`);
      else add(topLevel, cmd);
    }
  });
  const marker = async (name: string) => {
    const got = Promise.withResolvers<void>();
    seen.set(name, got.resolve);
    const t = setTimeout(() => got.reject(new Error(`MONITOR did not show ${name} in 10 s`)), 10_000);
    try {
      if (name !== "OK") await redis.client.send("ECHO", [name]);
      await got.promise;
    } finally {
      clearTimeout(t);
    }
  };
  await marker("OK"); // redis-cli prints OK once MONITOR is on
  const monitor = {
    topLevel,
    inScripts,
    async begin() {
      await marker("bench-monitor-begin");
      counting = true;
    },
    async end() {
      await marker("bench-monitor-end");
      counting = false;
    },
  };
  return {
    monitor,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
      await lines.catch(() => {});
    },
  };
}

/** Runs `run` with MONITOR counting from the probe's begin to its end; `baseline`: a checkout whose scripts are named too. */
export async function profile(
  redis: RedisProcess,
  run: (probe: Probe) => Promise<Throughput>,
  baseline?: string,
): Promise<{ r: Throughput } & CommandCounts> {
  const { monitor, stop } = await startMonitor(redis, baseline);
  try {
    const r = await run(monitor);
    return { r, topLevel: monitor.topLevel, inScripts: monitor.inScripts };
  } finally {
    await stop();
  }
}
