import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let started: Promise<string> | undefined;

async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

/**
 * A real redis-server for tests: SPOOL_TEST_REDIS_URL when CI started one, else one started here
 * (once per test process) with AOF on, and stopped by a watchdog when this process ends.
 */
export function redisUrl(): Promise<string> {
  const fromEnv = process.env.SPOOL_TEST_REDIS_URL;
  if (fromEnv) return Promise.resolve(fromEnv);
  started ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-redis-"));
    const port = await freePort();
    const proc = Bun.spawn(
      ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", dir],
      { stdout: "ignore", stderr: "inherit" },
    );
    // bun test emits no "exit" event: a detached watchdog ends redis when this process ends.
    Bun.spawn(["setsid", "bash", "-c", 'tail --pid="$1" -f /dev/null; kill "$2"; rm -rf "$3"', "redis-watchdog", String(process.pid), String(proc.pid), dir], {
      stdio: ["ignore", "ignore", "ignore"],
    }).unref();
    const url = `redis://127.0.0.1:${port}`;
    for (let i = 0; i < 500; i++) {
      try {
        const c = new Bun.RedisClient(url);
        await c.send("PING", []);
        c.close();
        return url;
      } catch {
        await Bun.sleep(10);
      }
    }
    throw new Error(`redis-server did not start on port ${port} (is it installed? apt-get install redis-server)`);
  })();
  return started;
}
