import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess } from "../../helpers/spawned.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const CLI = resolve(import.meta.dir, "../../../runtime/cli.ts");
/** Pids whose parent is `pid`, read from /proc (no procps needed). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("a server killed with SIGKILL leaves no worker process behind", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-orphans-"));
  try {
    await using server = spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", dir]);
    const [, url] = await server.waitFor(/Spool listening on (\S+)/);
    const [key] = await server.waitFor(/^\s+spool_\S+$/);
    const res = await fetch(`${url}/v2/echo/runsync`, {
      method: "POST",
      headers: { authorization: key!.trim() },
      body: '{"input":{"a":1}}',
    });
    expect(((await res.json()) as { status: string }).status).toBe("COMPLETED");
    const children = childrenOf(server.proc.pid);
    expect(children.length).toBe(1);
    server.proc.kill(9);
    await server.proc.exited;
    await until(() => !alive(children[0]!), "the orphaned worker to exit");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a spool worker supervisor killed with SIGKILL leaves no worker process behind", async () => {
  await using srv = await startTestServer();
  await using supervisor = spawnProcess([
    process.execPath,
    CLI,
    "worker",
    resolve(import.meta.dir, "../../../handlers/examples/echo.ts"),
    "--url",
    srv.url,
    "--endpoint",
    "echo",
    "--api-key",
    srv.key,
  ]);
  const [, queued] = await srv.json("POST", "/v2/echo/runsync", { input: { a: 1 } });
  expect(queued.status).toBe("COMPLETED");
  const children = childrenOf(supervisor.proc.pid);
  expect(children.length).toBe(1);
  supervisor.proc.kill(9);
  await supervisor.proc.exited;
  await until(() => !alive(children[0]!), "the orphaned worker to exit");
}, 30_000);
