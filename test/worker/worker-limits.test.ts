import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { MAX_TAKE_BATCH } from "../../runtime/protocol/limits.ts";
import { spawnProcess, spawnSpoolWorker } from "../helpers/spawned.ts";
import { alive, stuckPids } from "../helpers/stuck-pids.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const ROOT = resolve(import.meta.dir, "../..");
const CLI = join(ROOT, "runtime/cli.ts");
const BUN = process.execPath;
const pids = stuckPids();
afterAll(() => pids[Symbol.dispose]());

/** Forwards to the server and records every request's path and query, and its answer's status. */
function countingProxy(target: string) {
  const seen: { path: string; status: number }[] = [];
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const res = await fetch(`${target}${url.pathname}${url.search}`, { method: req.method, headers: req.headers, body: req.body });
      seen.push({ path: `${url.pathname}${url.search}`, status: res.status });
      return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
    },
  });
  return { url: `http://127.0.0.1:${proxy.port}`, seen, [Symbol.asyncDispose]: async () => proxy.stop(true) };
}

describe("worker limits", () => {
  test("a handler with concurrency 100 takes at most 64 jobs a request, gets all 100, and makes no request storm", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000 } });
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    await using proxy = countingProxy(srv.url);
    await using _worker = spawnSpoolWorker(join(ROOT, "test/fixtures/wide-fixture.ts"), { url: proxy.url, key: srv.key });
    await until(async () => (await srv.json("GET", "/v2/echo/health"))[1].jobs.inProgress === 100, "all 100 jobs running", 30_000);
    const takes = proxy.seen.filter((r) => r.path.includes("/job-take"));
    const sizes = takes.map((r) => Number(new URL(r.path, "http://x").searchParams.get("batch_size") ?? 1));
    expect(Math.max(...sizes)).toBe(MAX_TAKE_BATCH);
    expect(takes.filter((r) => r.status >= 400)).toEqual([]);
    // Two batches (64 + 36) took them; a worker answered 400 and asking again at once would
    // have sent thousands by now.
    expect(takes.length).toBeLessThanOrEqual(4);
    for (const id of ids) await srv.json("POST", `/v2/echo/cancel/${id}`);
  }, 60_000);

  for (const mode of ["busy", "blocked"] as const) {
    test(`spool worker: a ${mode} handler's job is TIMED_OUT and its process ended by the supervisor; a new process takes the next job`, async () => {
      await using srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100 } });
      await using worker = spawnSpoolWorker(join(ROOT, "test/fixtures/stuck-fixture.ts"), srv, {
        workerId: "w",
        env: { ...process.env, STUCK_PIDS_DIR: pids.dir, SPOOL_KILL_GRACE_MS: "500" },
      });
      const [, sub] = await srv.json("POST", "/v2/echo/run", { input: { mode }, policy: { executionTimeout: 6_000 } });
      await until(async () => (await srv.json("GET", `/v2/echo/status/${sub.id}`))[1].status === "IN_PROGRESS", "the job to start", 30_000);
      // The supervisor loads the handler too: the stuck process is the other one.
      const [stuckPid] = pids.live([worker.proc.pid]);
      expect(stuckPid).toBeDefined();
      await worker.waitFor(/terminating its worker process/);
      await until(() => !alive(stuckPid!), "the stuck process to end", 30_000);
      expect((await srv.json("GET", `/v2/echo/status/${sub.id}`))[1].status).toBe("TIMED_OUT");
      const [, next] = await srv.json("POST", "/v2/echo/runsync", { input: { mode: "quick" } });
      expect(next).toMatchObject({ status: "COMPLETED", workerId: "w-r2" });
      expect(next.output.pid).not.toBe(stuckPid);
      expect(alive(worker.proc.pid)).toBe(true);
    }, 60_000);
  }

  test("spool worker: a blocked handler's job, cancelled, is CANCELLED and its process ended by the supervisor after the grace; a new process takes the next job", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100 } });
    await using worker = spawnSpoolWorker(join(ROOT, "test/fixtures/stuck-fixture.ts"), srv, {
      workerId: "w",
      env: { ...process.env, STUCK_PIDS_DIR: pids.dir, SPOOL_KILL_GRACE_MS: "500", SPOOL_TIMEOUT_GRACE_MS: "500" },
    });
    // A deadline far away: only the cancel can end this job.
    const [, sub] = await srv.json("POST", "/v2/echo/run", { input: { mode: "blocked" }, policy: { executionTimeout: 600_000 } });
    await until(async () => (await srv.json("GET", `/v2/echo/status/${sub.id}`))[1].status === "IN_PROGRESS", "the job to start", 30_000);
    const [stuckPid] = pids.live([worker.proc.pid]);
    expect(stuckPid).toBeDefined();
    expect(await srv.json("POST", `/v2/echo/cancel/${sub.id}`)).toEqual([200, { id: sub.id, status: "CANCELLED" }]);
    await worker.waitFor(/was cancelled and did not end within its grace; terminating its worker process/);
    await until(() => !alive(stuckPid!), "the blocked process to end", 30_000);
    expect((await srv.json("GET", `/v2/echo/status/${sub.id}`))[1].status).toBe("CANCELLED");
    const [, next] = await srv.json("POST", "/v2/echo/runsync", { input: { mode: "quick" } });
    expect(next).toMatchObject({ status: "COMPLETED", workerId: "w-r2" });
    expect(alive(worker.proc.pid)).toBe(true);
  }, 60_000);
});

describe("a server that hangs", () => {
  test("stopped with SIGSTOP: the worker's requests time out instead of waiting forever, and it goes on after SIGCONT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-sigstop-"));
    const config = join(dir, "spool.toml");
    await Bun.write(config, `[server]\nport = 0\ndata = "${dir}/data"\ntakeWaitMs = 1000\nstopWaitMs = 1000\n[endpoints.echo]\n`);
    await using server = spawnProcess([BUN, CLI, "serve", "--config", config]);
    const [, key] = await server.waitFor(/^ {2}(\S{20,})$/);
    const [, url] = await server.waitFor(/endpoint echo: (http:\/\/\S+)\/v2\/echo/);
    await using worker = spawnSpoolWorker(
      join(ROOT, "handlers/examples/echo.ts"),
      { url: url!, key: key! },
      { env: { ...process.env, SPOOL_REQUEST_TIMEOUT_MS: "1000", SPOOL_LONG_POLL_TIMEOUT_MS: "3000", RUNPOD_PING_INTERVAL: "500" } },
    );
    const runsync = async () =>
      (await (
        await fetch(`${url}/v2/echo/runsync`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ input: { n: 1 } }),
        })
      ).json()) as { status: string };
    expect((await runsync()).status).toBe("COMPLETED");
    server.proc.kill("SIGSTOP");
    try {
      await worker.waitFor(/ping failed.*(timed out|TimeoutError|timeout)/i);
      await worker.waitFor(/job-take failed.*(timed out|TimeoutError|timeout)/i);
    } finally {
      server.proc.kill("SIGCONT");
    }
    expect((await runsync()).status).toBe("COMPLETED");
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
