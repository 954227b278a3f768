import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall, SYSTEM_PATH } from "./apt-install.ts";

let started: Promise<string> | undefined;
let installed: Promise<string> | undefined;

/**
 * The redis-server program: the one on PATH, else installed from apt once per test process (as
 * scripts/s3-server.sh does for radosgw), so `npm install && npm test` passes on a fresh machine.
 */
export function redisServerPath(): Promise<string> {
  installed ??= (async () => {
    const onPath = Bun.which("redis-server");
    if (onPath) return onPath;
    await aptInstall(["redis-server"]);
    const path = Bun.which("redis-server", { PATH: `${process.env.PATH ?? ""}:${SYSTEM_PATH}` });
    if (!path) throw new Error("apt-get installed redis-server, but no redis-server program is to be found");
    return path;
  })();
  return installed;
}

async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

/**
 * A real redis-server for tests: SPOOL_TEST_REDIS_URL when CI started one, else one started here
 * (once per test process, installed from apt when missing) with AOF on, and stopped by a
 * watchdog when this process ends.
 */
export function redisUrl(): Promise<string> {
  const fromEnv = process.env.SPOOL_TEST_REDIS_URL;
  if (fromEnv) return Promise.resolve(fromEnv);
  started ??= (async () => {
    const program = await redisServerPath();
    const dir = mkdtempSync(join(tmpdir(), "spool-redis-"));
    const port = await freePort();
    const proc = Bun.spawn([program, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", dir], {
      stdout: "ignore",
      stderr: "inherit",
    });
    // bun test emits no "exit" event: a detached watchdog ends redis when this process ends.
    Bun.spawn(
      [
        "setsid",
        "bash",
        "-c",
        'tail --pid="$1" -f /dev/null; kill "$2"; rm -rf "$3"',
        "redis-watchdog",
        String(process.pid),
        String(proc.pid),
        dir,
      ],
      {
        stdio: ["ignore", "ignore", "ignore"],
      },
    ).unref();
    const url = `redis://127.0.0.1:${port}`;
    if (await answers(url)) return url;
    throw new Error(`redis-server did not start on port ${port} (${program})`);
  })();
  return started;
}

/**
 * A redis-server of a test's own, which it may pause (SIGSTOP) to play one that stops answering,
 * or restart on the same port (with `aof`, keeping what it held, as a production Redis does);
 * `args` are more redis-server options.
 */
export async function startOwnRedis(
  opts: { aof?: boolean; args?: string[] } = {},
): Promise<{ url: string; proc: Bun.Subprocess; restart(): Promise<void> } & AsyncDisposable> {
  const program = await redisServerPath();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "spool-own-redis-"));
  const spawn = () =>
    Bun.spawn(
      [
        program,
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        opts.aof ? "yes" : "no",
        "--dir",
        dir,
        ...(opts.args ?? []),
      ],
      { stdout: "ignore", stderr: "inherit" },
    );
  const url = `redis://127.0.0.1:${port}`;
  const stop = async (proc: Bun.Subprocess) => {
    proc.kill("SIGCONT");
    proc.kill("SIGKILL");
    await proc.exited;
  };
  const redis = {
    url,
    proc: spawn(),
    /** Kills redis-server (SIGKILL) and starts it again on the same port. */
    async restart() {
      await stop(redis.proc);
      redis.proc = spawn();
      if (!(await answers(url))) throw new Error(`redis-server did not start again on port ${port}`);
    },
    async [Symbol.asyncDispose]() {
      await stop(redis.proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  if (await answers(url)) return redis;
  await redis[Symbol.asyncDispose]();
  throw new Error(`redis-server did not start on port ${port} (${program})`);
}

/** Whether a redis-server answers PING at `url` within about 5 s of starting. */
async function answers(url: string): Promise<boolean> {
  for (let i = 0; i < 500; i++) {
    try {
      const c = new Bun.RedisClient(url);
      await c.send("PING", []);
      c.close();
      return true;
    } catch {
      await Bun.sleep(10);
    }
  }
  return false;
}

/** Whether a process is stopped (SIGSTOP), read from /proc: an answer that came while it was could only have come from a timeout. */
export async function isPaused(proc: Bun.Subprocess): Promise<boolean> {
  const stat = await Bun.file(`/proc/${proc.pid}/stat`).text();
  return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
}
