import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnProcess, spawnSpoolWorker } from "../helpers/spawned.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const ROOT = resolve(import.meta.dir, "../..");
const CLI = join(ROOT, "runtime/cli.ts");
const BUN = process.execPath;
const polling = { server: { takeWaitMs: 30_000, stopWaitMs: 30_000 } };

describe("spool worker", () => {
  test("runs against the server through RunPod's environment contract alone", async () => {
    await using srv = await startTestServer(polling);
    const base = `${srv.url}/v2/echo`;
    await using _worker = spawnProcess([BUN, CLI, "worker", join(ROOT, "handlers/examples/echo.ts")], {
      env: {
        PATH: process.env.PATH,
        RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID?gpu=test`,
        RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID?gpu=test`,
        RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=test`,
        RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID?gpu=test`,
        RUNPOD_POD_ID: "pod-42",
        RUNPOD_AI_API_KEY: srv.key,
        RUNPOD_PING_INTERVAL: "10000",
      },
    });
    const [code, body] = await srv.json("POST", "/v2/echo/runsync", { input: { hello: "runpod" } });
    expect(code).toBe(200);
    expect(body).toMatchObject({ status: "COMPLETED", output: { hello: "runpod" }, workerId: "pod-42" });
  });

  test("cancel reaches one job among three running at once in a `spool worker` process; the others run on", async () => {
    await using srv = await startTestServer(polling);
    const dir = mkdtempSync(join(tmpdir(), "spool-cancel-"));
    try {
      await using _worker = spawnSpoolWorker(join(ROOT, "test/fixtures/hold-many-fixture.ts"), srv);
      const ids: string[] = [];
      for (const n of [0, 1, 2])
        ids.push((await srv.json("POST", "/v2/echo/run", { input: { stopped: join(dir, `stopped-${n}`) } }))[1].id);
      const status = async (id: string) => (await srv.json("GET", `/v2/echo/status/${id}`))[1].status;
      await until(async () => (await Promise.all(ids.map(status))).every((s) => s === "IN_PROGRESS"), "all three jobs to run");
      expect(await srv.json("POST", `/v2/echo/cancel/${ids[1]}`)).toEqual([200, { id: ids[1], status: "CANCELLED" }]);
      // The cancelled job's handler saw its signal, in the worker process.
      await until(() => existsSync(join(dir, "stopped-1")), "the cancelled handler's signal");
      expect(readFileSync(join(dir, "stopped-1"), "utf8")).toBe("JobCancelled");
      // The other two are still running, and their handlers were never told to stop: the worker
      // is still holding them when it reports in (its heartbeat lists them).
      expect(await Promise.all(ids.map(status))).toEqual(["IN_PROGRESS", "CANCELLED", "IN_PROGRESS"]);
      expect(await srv.json("POST", `/v2/echo/cancel/${ids[2]}`)).toEqual([200, { id: ids[2], status: "CANCELLED" }]);
      await until(() => existsSync(join(dir, "stopped-2")), "the second cancelled handler's signal");
      expect(existsSync(join(dir, "stopped-0"))).toBe(false);
      expect(await status(ids[0]!)).toBe("IN_PROGRESS");
      // The last one too, so that the worker stops at once when the test ends.
      await srv.json("POST", `/v2/echo/cancel/${ids[0]}`);
      await until(() => existsSync(join(dir, "stopped-0")), "the last cancelled handler's signal");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a worker that asks to be replaced is: a new process with a new worker id takes the next job", async () => {
    await using srv = await startTestServer(polling);
    await using _worker = spawnSpoolWorker(join(ROOT, "test/fixtures/replace-fixture.ts"), srv, { workerId: "fixed" });
    const [, first] = await srv.json("POST", "/v2/echo/runsync", { input: { refresh: true } });
    const [, second] = await srv.json("POST", "/v2/echo/runsync", { input: {} });
    expect(first.status).toBe("COMPLETED");
    expect(second.status).toBe("COMPLETED");
    // Even with a fixed id, the replacement is a new worker: the jobs of the one that ended
    // follow the worker-loss rule instead of staying IN_PROGRESS under a living id.
    expect([first.output.workerId, second.output.workerId]).toEqual(["fixed", "fixed-r2"]);
    expect(second.output.pid).not.toBe(first.output.pid);
  });

  test("a result JSON cannot carry fails its job naming the problem; a progress value it cannot carry is dropped; the worker goes on", async () => {
    await using srv = await startTestServer(polling);
    await using _worker = spawnSpoolWorker(join(ROOT, "test/fixtures/not-json-fixture.ts"), srv);
    const [, first] = await srv.json("POST", "/v2/echo/runsync", { input: { give: "ok" } });
    const [, big] = await srv.json("POST", "/v2/echo/runsync", { input: { give: "bigint" } });
    const [, cycle] = await srv.json("POST", "/v2/echo/runsync", { input: { give: "cycle" } });
    const [, progress] = await srv.json("POST", "/v2/echo/runsync", { input: { give: "progress" } });
    const [, last] = await srv.json("POST", "/v2/echo/runsync", { input: { give: "ok" } });
    expect(big.status).toBe("FAILED");
    expect(JSON.parse(big.error)).toMatchObject({
      error_type: "TypeError",
      error_message: expect.stringMatching(/cannot be sent as JSON: .*BigInt/i),
    });
    expect(cycle.status).toBe("FAILED");
    expect(JSON.parse(cycle.error).error_message).toMatch(/cannot be sent as JSON: .*(cyclic|circular)/i);
    expect(progress).toMatchObject({ status: "COMPLETED", output: { pid: first.output.pid } });
    expect(last).toMatchObject({ status: "COMPLETED", output: { pid: first.output.pid } });
  });

  test("a missing server setting is a clear startup error", async () => {
    await using p = spawnProcess([BUN, CLI, "worker", join(ROOT, "handlers/examples/echo.ts"), "--url", "http://127.0.0.1:9"], {
      env: { PATH: process.env.PATH },
    });
    expect(await p.proc.exited).not.toBe(0);
    await p.waitFor(/--url needs --endpoint/);
  });
});

describe("spool run", () => {
  test("runs one job and prints its output; bad input exits non-zero naming the field", async () => {
    const ok = Bun.spawnSync([BUN, CLI, "run", join(ROOT, "handlers/examples/stream.ts"), "--input", '{"text":"a b"}']);
    expect(ok.exitCode).toBe(0);
    expect(JSON.parse(ok.stdout.toString())).toEqual(["a", "b"]);
    const bad = Bun.spawnSync([BUN, CLI, "run", join(ROOT, "handlers/examples/stream.ts"), "--input", '{"text":1}']);
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString()).toContain("Invalid parameter: text:");
  });

  test("reads ./test_input.json as runpod-python does", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-run-"));
    try {
      await Bun.write(join(dir, "test_input.json"), JSON.stringify({ input: { from: "file" } }));
      const r = Bun.spawnSync([BUN, CLI, "run", join(ROOT, "handlers/examples/echo.ts")], { cwd: dir });
      expect(r.exitCode).toBe(0);
      expect(JSON.parse(r.stdout.toString())).toEqual({ from: "file" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("spool dev", () => {
  test("serves the handler through the real queue server: run, status and stream", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-dev-"));
    try {
      await using dev = spawnProcess([BUN, CLI, "dev", join(ROOT, "handlers/examples/stream.ts"), "--port", "0", "--data", dir]);
      const [, url] = await dev.waitFor(/^Spool dev: (\S+) with a worker/);
      const [key] = await dev.waitFor(/^spool_\S+$/);
      const headers = { authorization: `Bearer ${key}` };
      const run = (await (
        await fetch(`${url}/run`, { method: "POST", headers, body: JSON.stringify({ input: { text: "x y z" } }) })
      ).json()) as { id: string };
      const chunks: unknown[] = [];
      for (;;) {
        const s = (await (await fetch(`${url}/stream/${run.id}`, { headers })).json()) as { status: string; stream: { output: unknown }[] };
        chunks.push(...s.stream.map((c) => c.output));
        if (s.status === "COMPLETED") break;
      }
      expect(chunks).toEqual(["x", "y", "z"]);
      const status = (await (await fetch(`${url}/status/${run.id}`, { headers })).json()) as { output: unknown };
      expect(status.output).toEqual(["x", "y", "z"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("spool build", () => {
  test("the compiled worker runs from a directory with no Bun and no node_modules", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-bin-"));
    try {
      const built = Bun.spawnSync([
        BUN,
        CLI,
        "build",
        join(ROOT, "handlers/examples/echo.ts"),
        "--outfile",
        join(dir, "build", "echo-worker"),
      ]);
      expect(built.exitCode).toBe(0);
      const bare = join(dir, "bare");
      await Bun.write(join(bare, ".keep"), "");
      copyFileSync(join(dir, "build", "echo-worker"), join(bare, "echo-worker"));
      Bun.spawnSync(["chmod", "+x", join(bare, "echo-worker")]);

      await using srv = await startTestServer(polling);
      await using _worker = spawnProcess(["./echo-worker", "--url", srv.url, "--endpoint", "echo", "--api-key", srv.key], {
        cwd: bare,
        env: { PATH: "/usr/bin:/bin" },
      });
      const [, body] = await srv.json("POST", "/v2/echo/runsync", { input: { compiled: true } });
      expect(body).toMatchObject({ status: "COMPLETED", output: { compiled: true } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("handler options", () => {
  const FIXTURE = join(ROOT, "test/fixtures/options-fixture.ts");

  test("the endpoint's options reach setup and ctx.options, parsed by the handler's schema", async () => {
    const r = Bun.spawnSync([BUN, CLI, "run", FIXTURE, "--input", "{}"], {
      env: { ...process.env, SPOOL_HANDLER_OPTIONS: JSON.stringify({ model: "/models/tiny.gguf" }) },
    });
    expect(r.exitCode).toBe(0);
    const parsed = { model: "/models/tiny.gguf", steps: 4 };
    expect(JSON.parse(r.stdout.toString())).toEqual({ setup: parsed, ctx: parsed });
  });

  test("options that fail the schema stop the worker with a message naming the setting", async () => {
    const r = Bun.spawnSync([BUN, CLI, "worker", FIXTURE, "--url", "http://127.0.0.1:9", "--endpoint", "x", "--api-key", "k"], {
      env: { ...process.env, SPOOL_HANDLER_OPTIONS: JSON.stringify({ steps: "many" }) },
    });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr.toString()).toContain("handler options: model:");
  });
});
