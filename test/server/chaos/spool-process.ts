import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { redisUrl } from "../../helpers/redis-server.ts";
import { spawnProcess, type Spawned } from "../../helpers/spawned.ts";

const CLI = resolve(import.meta.dir, "../../../runtime/cli.ts");
const BUN = process.execPath;

/** Where a test's servers keep their jobs: the embedded SQLite store, or one Redis they share. */
export type StoreKind = "sqlite" | "redis";

/** One `spool serve` process that a test may kill -9 and start again on the same store. */
export interface SpoolProcess {
  /** The current process's base URL; it changes on restart (port 0). */
  readonly url: string;
  /** Resolves while the current process is up; after a kill, once it is up again. */
  readonly up: Promise<void>;
  /** SIGKILL, with no chance to finish anything it was doing. */
  kill9(): Promise<void>;
  /** Starts the process again on the same data directory and store. */
  restart(): Promise<void>;
  /** Everything the current process printed (stdout and stderr). */
  lines(): string[];
}

/**
 * Real `spool serve` processes on one store: each with its own data directory, all sharing the
 * SQLite file of `data-0` (only one server then) or one Redis prefix. Disposing kills them all.
 */
export async function spoolCluster(kind: StoreKind, servers: number, configToml: string) {
  const dir = mkdtempSync(join(tmpdir(), "spool-chaos-"));
  const config = join(dir, "spool.toml");
  await Bun.write(config, configToml);
  const store = kind === "redis" ? `${await redisUrl()}?prefix=chaos-${crypto.randomUUID().slice(0, 8)}` : undefined;
  const storeFlags = store ? ["--store", store] : [];
  const made = Bun.spawnSync([BUN, CLI, "keys", "create", "--name", "chaos", "--data", join(dir, "data-0"), ...storeFlags]);
  if (made.exitCode !== 0) throw new Error(`spool keys create failed: ${made.stderr.toString()}`);
  const key = made.stdout.toString().trim().split("\n").at(-1)!;

  const procs: Spawned[] = [];
  async function start(i: number): Promise<{ proc: Spawned; url: string }> {
    const proc = spawnProcess([
      BUN,
      CLI,
      "serve",
      "--port",
      "0",
      "--data",
      join(dir, `data-${store ? i : 0}`),
      "--config",
      config,
      ...storeFlags,
    ]);
    procs.push(proc);
    const [, url] = await proc.waitFor(/Spool listening on (\S+)/);
    return { proc, url: url! };
  }

  const nodes: SpoolProcess[] = [];
  for (let i = 0; i < servers; i++) {
    let current = await start(i);
    let up: Promise<void> = Promise.resolve();
    let wentUp = () => {};
    nodes.push({
      get url() {
        return current.url;
      },
      get up() {
        return up;
      },
      async kill9() {
        up = new Promise<void>((r) => (wentUp = r));
        current.proc.proc.kill(9);
        await current.proc.proc.exited;
      },
      async restart() {
        current = await start(i);
        wentUp();
      },
      lines: () => current.proc.lines,
    });
  }

  return {
    key,
    nodes,
    /** The SQLite file of the embedded store. */
    dbPath: join(dir, "data-0", "spool.db"),
    /** The Redis URL and key prefix of the shared store. */
    redis: store ? { url: store.replace(/\?.*$/, ""), prefix: new URL(store).searchParams.get("prefix")! } : undefined,
    async [Symbol.asyncDispose]() {
      for (const p of procs) await p[Symbol.asyncDispose]();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The seed from SPOOL_CHAOS_SEED (to replay a run, or try others), else a fixed one, so that a
 * plain run makes the same choices each time; printed either way.
 */
export function chaosSeed(what: string): number {
  const seed = process.env.SPOOL_CHAOS_SEED ? Number(process.env.SPOOL_CHAOS_SEED) : 1;
  console.log(`${what}: seed ${seed} (replay with SPOOL_CHAOS_SEED=${seed})`);
  return seed;
}
