import { mkdirSync } from "node:fs";
import { freePort } from "./free-port.ts";
import { drain, outputTail } from "./pipes.ts";
import { stopProcess } from "./processes.ts";

/** A redis-server child of this process, answering PING. */
export interface RedisProcess {
  port: number;
  url: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** A connection of this process, for INFO, FLUSHALL and markers. */
  client: Bun.RedisClient;
  /** What redis-server wrote so far (for error reports). */
  output: () => string;
  /** Closes the client, then SIGTERM (SIGKILL after 3 s). */
  stop: () => Promise<void>;
}

/** Starts a redis-server of its own: AOF on (fsync every second), data in `dir`, a free loopback port. */
export async function startRedis(dir: string): Promise<RedisProcess> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
  ];
  let proc: RedisProcess["proc"];
  try {
    proc = Bun.spawn(["redis-server", ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    throw new Error(`cannot start redis-server (apt-get install redis-server): ${(e as Error).message}`);
  }
  const out = outputTail();
  void drain(proc.stdout, out.add);
  void drain(proc.stderr, out.add);
  const url = `redis://127.0.0.1:${port}`;
  const output = () => `--- redis-server\n${out.text()}`;
  for (let i = 0; i < 500; i++) {
    if (proc.exitCode !== null) break;
    const client = new Bun.RedisClient(url, { autoReconnect: false });
    try {
      await client.send("PING", []);
    } catch {
      client.close();
      await Bun.sleep(10);
      continue;
    }
    const stop = async () => {
      client.close();
      await stopProcess(proc, 3_000);
    };
    return { port, url, proc, client, output, stop };
  }
  proc.kill("SIGKILL");
  throw new Error(`redis-server did not start on port ${port}\n${output()}`);
}
