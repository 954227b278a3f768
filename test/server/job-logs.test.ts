import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { spawnSpoolWorker } from "../helpers/spawned.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const ROOT = resolve(import.meta.dir, "../..");
const FIXTURE = join(ROOT, "test/fixtures/log-fixture.ts");
const polling = { takeWaitMs: 30_000, stopWaitMs: 30_000 };

/** The five lines the fixture writes first, one each way a handler can, as /logs answers them. */
const FIRST_FIVE = [
  { level: "info", message: "console.log line 1" },
  { level: "info", message: 'ctx.log line {"step":2}' },
  { level: "stdout", message: "stdout line 3" },
  { level: "error", message: "console.error line 4" },
  { level: "stderr", message: "stderr line 5" },
];
const untimed = (lines: { time: number; level: string; message: string }[]) => lines.map(({ level, message }) => ({ level, message }));

function startWorker(srv: TestServer) {
  return spawnSpoolWorker(FIXTURE, srv);
}

describe("job logs", () => {
  test("what a handler prints and logs reaches /logs in order; ?since continues; bad reads are JSON errors", async () => {
    await using srv = await startTestServer({ server: polling });
    await using _worker = startWorker(srv);
    const [code, done] = await srv.json("POST", "/v2/echo/runsync", { input: {} });
    expect([code, done.status]).toEqual([200, "COMPLETED"]);
    // The lines are kept before the result is: they are all there once the job has ended.
    const [status, body] = await srv.json("GET", `/v2/echo/logs/${done.id}`);
    expect(status).toBe(200);
    expect({ ...body, logs: untimed(body.logs) }).toEqual({ id: done.id, logs: FIRST_FIVE, truncated: false });
    for (const line of body.logs) expect(typeof line.time).toBe("number");
    const [, rest] = await srv.json("GET", `/v2/echo/logs/${done.id}?since=3`);
    expect(untimed(rest.logs)).toEqual(FIRST_FIVE.slice(3));
    expect(await srv.json("GET", `/v2/echo/logs/${done.id}?since=5`)).toEqual([200, { id: done.id, logs: [], truncated: false }]);
    expect(await srv.json("GET", `/v2/echo/logs/${done.id}?since=-1`)).toEqual([
      400,
      { error: 'query parameter since must be an integer from 0 to 1000000000, got "-1"' },
    ]);
    expect(await srv.json("GET", "/v2/echo/logs/no-such-job")).toEqual([
      404,
      { error: "job no-such-job not found (unknown, purged or expired)" },
    ]);
    // A read-only key reads them; a worker key does not.
    const readOnly = await createKey(srv.store, "reader", Date.now(), { scope: "read-only" });
    expect((await srv.json("GET", `/v2/echo/logs/${done.id}`, undefined, { auth: `Bearer ${readOnly.key}` }))[0]).toBe(200);
    const worker = await createKey(srv.store, "w", Date.now(), { scope: "worker" });
    expect((await srv.json("GET", `/v2/echo/logs/${done.id}`, undefined, { auth: `Bearer ${worker.key}` }))[0]).toBe(401);
  });

  test("lines arrive as `log` events of the job's event stream while it runs, in order, before its final status", async () => {
    await using srv = await startTestServer({ server: polling });
    await using _worker = startWorker(srv);
    const dir = mkdtempSync(join(tmpdir(), "spool-logs-"));
    try {
      const release = join(dir, "release");
      const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { release } });
      const res = await fetch(`${srv.url}/v2/echo/status/${id}`, {
        headers: { authorization: `Bearer ${srv.key}`, accept: "text/event-stream" },
      });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      const events: { event: string; data: any }[] = [];
      let buffer = "";
      const readUntil = async (done: () => boolean) => {
        while (!done()) {
          const { value, done: ended } = await reader.read();
          if (ended) return;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end).split("\n");
            buffer = buffer.slice(end + 2);
            const field = (name: string) => block.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
            if (field("data") !== undefined) events.push({ event: field("event")!, data: JSON.parse(field("data")!) });
          }
        }
      };
      const logs = () => events.filter((e) => e.event === "log").map((e) => ({ level: e.data.level, message: e.data.message }));
      await readUntil(() => logs().length >= 5);
      // Live: the job is still running, held by the fixture until the file exists.
      expect(logs()).toEqual(FIRST_FIVE);
      expect(
        events
          .filter((e) => e.event === "status")
          .map((e) => e.data.status)
          .at(-1),
      ).toBe("IN_PROGRESS");
      writeFileSync(release, "");
      await readUntil(() => false);
      expect(logs()).toEqual([...FIRST_FIVE, { level: "warn", message: "released" }]);
      const last = events.at(-1)!;
      expect([last.event, last.data.status]).toEqual(["status", "COMPLETED"]);
      expect(events.findIndex((e) => e.event === "log" && e.data.message === "released")).toBeLessThan(events.length - 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("with two jobs running at once in one worker, each job's log has its ctx.log lines only", async () => {
    await using srv = await startTestServer({ server: polling });
    await using _worker = spawnSpoolWorker(join(ROOT, "test/fixtures/log-many-fixture.ts"), srv);
    const dir = mkdtempSync(join(tmpdir(), "spool-logs-"));
    try {
      const go = join(dir, "go");
      const ids: string[] = [];
      for (const name of ["a", "b"]) ids.push((await srv.json("POST", "/v2/echo/run", { input: { go, name } }))[1].id);
      const status = async (id: string) => (await srv.json("GET", `/v2/echo/status/${id}`))[1].status;
      // Both handlers run in the worker (a job taken is not yet a handler running): a line printed
      // while one runs alone would be that job's.
      await until(() => existsSync(`${go}.a`) && existsSync(`${go}.b`), "both handlers to run");
      writeFileSync(go, "");
      // Both jobs print and log while both run; they end only once both lines are kept.
      const logged = async (id: string) => (await srv.json("GET", `/v2/echo/logs/${id}`))[1].logs.length > 0;
      await until(async () => (await Promise.all(ids.map(logged))).every(Boolean), "both jobs' ctx.log lines");
      writeFileSync(`${go}.end`, "");
      await until(async () => (await Promise.all(ids.map(status))).every((s) => s === "COMPLETED"), "both jobs to end");
      // What was printed cannot be told apart between the two jobs, so neither keeps it.
      expect(untimed((await srv.json("GET", `/v2/echo/logs/${ids[0]}`))[1].logs)).toEqual([{ level: "info", message: "logged by a" }]);
      expect(untimed((await srv.json("GET", `/v2/echo/logs/${ids[1]}`))[1].logs)).toEqual([{ level: "info", message: "logged by b" }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a job's log stops at server.logMaxBytes with one last line that says so", async () => {
    await using srv = await startTestServer({ server: { ...polling, logMaxBytes: 4096 } });
    await using _worker = startWorker(srv);
    const [, done] = await srv.json("POST", "/v2/echo/runsync", { input: { repeat: 200 } });
    expect(done.status).toBe("COMPLETED");
    const [, body] = await srv.json("GET", `/v2/echo/logs/${done.id}`);
    expect(body.truncated).toBe(true);
    const lines = untimed(body.logs);
    expect(lines.slice(0, 5)).toEqual(FIRST_FIVE);
    // Then the repeated lines in order, as many as fit, and the line that closes the log.
    const repeated = lines.slice(5, -1).map((l) => l.message);
    expect(repeated.length).toBeGreaterThan(10);
    expect(repeated.length).toBeLessThan(200);
    expect(repeated).toEqual(repeated.map((_, i) => `${String(i).padStart(4, "0")} ${"x".repeat(95)}`));
    expect(lines.at(-1)).toEqual({ level: "warn", message: "log limit of 4096 bytes reached: later lines of this job are not kept" });
    const bytes = body.logs.slice(0, -1).reduce((n: number, l: { message: string }) => n + Buffer.byteLength(l.message) + 16, 0);
    expect(bytes).toBeLessThanOrEqual(4096);
  });
});
