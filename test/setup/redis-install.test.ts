import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

// `npm install && npm test` on a fresh machine: the Redis tests' setup installs redis-server from
// apt when it is not on PATH, as the S3 setup does for radosgw. Here PATH is every program this
// machine has except redis-server, and the helper must still hand out a Redis that answers.

const HELPER = join(import.meta.dir, "..", "helpers", "redis-server.ts");

/** A folder of links to every program on PATH except redis-server*, used as the only PATH. */
function pathWithoutRedis(): { dir: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "spool-no-redis-"));
  for (const from of (process.env.PATH ?? "").split(delimiter)) {
    let names: string[];
    try {
      names = readdirSync(from);
    } catch {
      continue;
    }
    for (const name of names) {
      if (name.startsWith("redis-server")) continue;
      try {
        symlinkSync(join(from, name), join(dir, name));
      } catch {
        // an earlier PATH entry already provides this name
      }
    }
  }
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

test("the Redis test setup installs redis-server when PATH has none, then starts it", async () => {
  using bin = pathWithoutRedis();
  const script = `
    import { redisUrl } from ${JSON.stringify(HELPER)};
    console.log("on PATH:", Bun.which("redis-server"));
    const client = new Bun.RedisClient(await redisUrl());
    console.log("answer:", await client.send("PING", []));
    client.close();
    process.exit(0);
  `;
  const env: Record<string, string> = { ...process.env, PATH: bin.dir } as Record<string, string>;
  delete env.SPOOL_TEST_REDIS_URL;
  const proc = Bun.spawn([process.execPath, "-e", script], { env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, out, err: code === 0 ? "" : err }).toEqual({ code: 0, out: "on PATH: null\nanswer: PONG\n", err: "" });
}, 300_000);
