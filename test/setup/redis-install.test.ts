import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

// `npm install && npm test` on a fresh machine: the Redis tests' setup installs redis-server from
// apt when it is not on PATH, as the S3 setup does for radosgw. Here PATH is every program this
// machine has except redis-server and apt-get, and in apt-get's place a stand-in that records how
// it is called and "installs" the package by linking this machine's redis-server into a folder on
// PATH: the real apt-get would change the machine (and finds the package installed already), so
// what is checked is the setup's side: the calls it makes, and that it starts what was installed.

const HELPER = join(import.meta.dir, "..", "helpers", "redis-server.ts");

/** A folder of links to every program on PATH except redis-server* and apt-get, used as the only PATH. */
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
      if (name.startsWith("redis-server") || name === "apt-get") continue;
      try {
        symlinkSync(join(from, name), join(dir, name));
      } catch {
        // an earlier PATH entry already provides this name
      }
    }
  }
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * An apt-get that logs its arguments, fails an install until `update` has run (a fresh machine's
 * empty package lists), then installs redis-server as a link into `bin`.
 */
function fakeAptGet(bin: string, state: string, redisServer: string): void {
  const script = `#!/bin/sh
echo "$*" >> "${state}/calls"
case "$*" in
  *" update") touch "${state}/updated" ;;
  *" install redis-server")
    [ -e "${state}/updated" ] || { echo "E: Unable to locate package redis-server" >&2; exit 100; }
    ln -s "${redisServer}" "${bin}/redis-server" ;;
  *) exit 1 ;;
esac
`;
  writeFileSync(join(bin, "apt-get"), script, { mode: 0o755 });
}

test("with no redis-server on PATH, the Redis test setup runs apt-get install (after apt-get update when the first try fails) and starts the program installed", async () => {
  const real = Bun.which("redis-server");
  if (!real) throw new Error("this test links the machine's redis-server as the one apt installs: none is on PATH");
  using bin = pathWithoutRedis();
  const state = mkdtempSync(join(tmpdir(), "spool-apt-"));
  using _state = { [Symbol.dispose]: () => rmSync(state, { recursive: true, force: true }) };
  fakeAptGet(bin.dir, state, real);
  const script = `
    import { redisServerPath, redisUrl } from ${JSON.stringify(HELPER)};
    console.log("on PATH:", Bun.which("redis-server"));
    console.log("started:", await redisServerPath());
    const client = new Bun.RedisClient(await redisUrl());
    console.log("answer:", await client.send("PING", []));
    client.close();
    process.exit(0);
  `;
  const env: Record<string, string> = { ...process.env, PATH: bin.dir } as Record<string, string>;
  delete env.SPOOL_TEST_REDIS_URL;
  const proc = Bun.spawn([process.execPath, "-e", script], { env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, out, err: code === 0 ? "" : err }).toEqual({
    code: 0,
    out: `on PATH: null\nstarted: ${join(bin.dir, "redis-server")}\nanswer: PONG\n`,
    err: "",
  });
  const apt = "-y -q -o DPkg::Lock::Timeout=300";
  expect(readFileSync(join(state, "calls"), "utf8")).toBe(`${apt} install redis-server\n${apt} update\n${apt} install redis-server\n`);
}, 60_000);
