import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startRedis, type RedisProcess } from "./redis-process.ts";
import { startSpool, type SpoolProcess } from "./spool-process.ts";
import { stopProcess } from "./processes.ts";
import { makeTempDir, removeDir } from "./temp-dir.ts";

/** The endpoint every queue scenario submits to. */
export const ENDPOINT = "bench";

/** The queue benchmark's figures, as the flags set them. */
export interface QueueSettings {
  /** No-op jobs per throughput run. */
  jobs: number;
  /**
   * Jobs run through each system untimed before the timed ones (every throughput run; a MONITOR
   * pass takes WARM_UP_JOBS): the servers, the workers and BullMQ's Workers are fresh processes
   * whose JavaScript the optimising tiers have not compiled yet; a queue runs for days, so the
   * timed window measures it warmed up.
   */
  warm: number;
  /** Submit loops. */
  clients: number;
  /** Sequential runsync calls timed. */
  runsync: number;
}

/**
 * The queue benchmark's processes and files: one temp dir with the server config, the Spool
 * servers now running, and the throwaway redis-server once started.
 */
export interface QueueRig {
  settings: QueueSettings;
  /** The redis-server, once startRedis() ran. */
  redis?: RedisProcess;
  /** `prefix-N`, N counting up: unique data dirs, Redis key prefixes and BullMQ queue names. */
  unique(prefix: string): string;
  /** Starts `spool serve` on a fresh data dir; with `store` (a Redis URL) it shares that store. */
  startServer(
    name: string,
    opts?: { store?: string; key?: string; prepare?: (dataDir: string) => Promise<void>; root?: string; script?: string },
  ): Promise<SpoolProcess>;
  stopServer(server: SpoolProcess): Promise<void>;
  startRedis(): Promise<RedisProcess>;
  /** What every running server and redis-server wrote (for a failure report). */
  outputs(): string[];
  /** Stops every process and removes the temp dir. */
  close(): Promise<void>;
  /** Last resort on exit: SIGKILL to every child, temp dir removed, synchronously. */
  killAll(): void;
}

// The spec's per-window request counts would cap a run at 100 POST /run a second: lift them,
// keep the spec's `concurrent` limits (so admission is counted as in a default deployment), and
// raise workersMax so the 429 backpressure rule (queue > workersMax * 500) does not trip.
const CONFIG = `[server]
host = "127.0.0.1"
takeWaitMs = 20000

[endpoints.${ENDPOINT}]
workersMax = 1000

[endpoints.${ENDPOINT}.rateLimits]
run = { requests = 100000000, concurrent = 200 }
runsync = { requests = 100000000, concurrent = 400 }
status = { requests = 100000000, concurrent = 400 }
`;

/** Makes the temp dir and writes the server config; starts nothing yet. */
export function createQueueRig(settings: QueueSettings): QueueRig {
  const tmpRoot = makeTempDir("spool-bench-");
  const configPath = join(tmpRoot, "bench.toml");
  writeFileSync(configPath, CONFIG);
  const running = new Set<SpoolProcess>();
  let seq = 0;

  const rig: QueueRig = {
    settings,
    unique: (prefix) => `${prefix}-${++seq}`,
    async startServer(name, opts = {}) {
      const dataDir = join(tmpRoot, name);
      mkdirSync(dataDir);
      await opts.prepare?.(dataDir);
      const server = await startSpool({
        name,
        dataDir,
        configPath,
        store: opts.store,
        key: opts.key,
        root: opts.root,
        script: opts.script,
      });
      running.add(server);
      return server;
    },
    async stopServer(server) {
      running.delete(server);
      await stopProcess(server.proc, 3_000);
    },
    async startRedis() {
      rig.redis = await startRedis(join(tmpRoot, "redis"));
      return rig.redis;
    },
    outputs: () => [...[...running].map((s) => s.output()), ...(rig.redis ? [rig.redis.output()] : [])],
    async close() {
      await Promise.all([...running].map(rig.stopServer));
      await rig.redis?.stop();
      removeDir(tmpRoot);
    },
    killAll() {
      for (const s of running) s.proc.kill("SIGKILL");
      rig.redis?.proc.kill("SIGKILL");
      removeDir(tmpRoot);
    },
  };
  return rig;
}
