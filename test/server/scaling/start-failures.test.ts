import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { ConfigInput } from "../../../runtime/config/config.ts";
import { MemoryLog, type Log } from "../../../runtime/log.ts";
import { Exposition } from "../../helpers/prometheus.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../../fixtures/start-fails-fixture.ts");

/** Real worker processes on the wall clock, with the scaler ticking every 20 ms. */
async function failingServer(endpoint: NonNullable<ConfigInput["endpoints"]>[string], log: Log) {
  return startTestServer({
    log,
    server: { scaleIntervalMs: 20 },
    // No window: the limit alone makes the endpoint fail (the window has tests of its own).
    endpoints: {
      ep: {
        startFailureLimit: 2,
        startFailureWindowMs: 0,
        idleTimeout: 3600,
        rateLimits: { status: { requests: 1_000_000 } },
        ...endpoint,
      },
    },
  });
}
const health = async (srv: TestServer) => (await srv.json("GET", "/v2/ep/health"))[1];

async function startFailureMetric(srv: TestServer): Promise<number> {
  return new Exposition(await (await srv.call("GET", "/metrics")).text()).value("spool_worker_start_failures_total", { endpoint: "ep" });
}

/** The job's error as RunPod's shape: the JSON text of {error_type, error_message, ...}. */
const jobError = (job: { error: string }) =>
  JSON.parse(job.error) as { error_type: string; error_message: string; error_traceback: string };

describe("workers that cannot start", () => {
  const cases = [
    { name: "setup throws", options: {}, reason: /model file .*missing\.onnx not found \(exited with code 1 before it was ready\)/ },
    { name: "killed by a signal at start", options: { signal: "SIGKILL" }, reason: /killed by SIGKILL before it was ready/ },
  ];
  for (const c of cases) {
    test(`${c.name}: the reason reaches /health, the metric and the log; the queued job fails, /run is a 503; fixed, jobs run again`, async () => {
      const log = new MemoryLog();
      const dir = mkdtempSync(join(tmpdir(), "spool-start-"));
      const model = join(dir, "missing.onnx");
      await using srv = await failingServer({ handler: FIXTURE, options: { model, ...c.options } }, log);
      const [, queued] = await srv.json("POST", "/v2/ep/run", { input: {} });

      // After the limit (2 starts), the job is FAILED with the start error.
      const failed = await until(async () => {
        const [, job] = await srv.json("GET", `/v2/ep/status/${queued.id}`);
        return job.status === "FAILED" && job;
      }, "the queued job to fail");
      expect(jobError(failed).error_type).toBe("WorkerStartError");
      expect(jobError(failed).error_message).toMatch(c.reason);

      const h = await health(srv);
      expect(h.workers.failing).toBeGreaterThanOrEqual(2);
      expect(h.lastStartError).toMatchObject({ refusing: true, onStartFailure: "fail" });
      expect(h.lastStartError.message).toMatch(c.reason);
      expect(await startFailureMetric(srv)).toBeGreaterThanOrEqual(2);
      expect(log.lines.some((l) => JSON.parse(l).msg.startsWith("worker failed to start:") && c.reason.test(JSON.parse(l).msg))).toBe(true);

      const refused = await srv.call("POST", "/v2/ep/run", { input: {} });
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(((await refused.json()) as { error: string }).error).toMatch(c.reason);

      // The model file arrives: the next start succeeds, and the endpoint takes jobs again.
      writeFileSync(model, "weights");
      await until(async () => (await health(srv)).lastStartError === undefined, "a worker to start", 60_000);
      const [status, again] = await srv.json("POST", "/v2/ep/runsync", { input: {} });
      expect(status).toBe(200);
      expect(again).toMatchObject({ status: "COMPLETED", output: { ok: true } });
    }, 90_000);
  }

  test("a missing binary is a start failure with the reason", async () => {
    const log = new MemoryLog();
    await using srv = await failingServer({ handler: "/nonexistent/spool-worker-binary" }, log);
    const [, queued] = await srv.json("POST", "/v2/ep/run", { input: {} });
    await until(async () => (await srv.json("GET", `/v2/ep/status/${queued.id}`))[1].status === "FAILED", "the queued job to fail");
    const h = await health(srv);
    expect(h.lastStartError.message).toMatch(/cannot start \/nonexistent\/spool-worker-binary/);
    expect(h.lastStartError.exitCode).toBe(127);
  });

  test("onStartFailure queue: the job keeps waiting and submissions are accepted, with the error on /health", async () => {
    const log = new MemoryLog();
    await using srv = await failingServer(
      { handler: FIXTURE, options: { model: "/nonexistent/missing.onnx" }, onStartFailure: "queue" },
      log,
    );
    const [, queued] = await srv.json("POST", "/v2/ep/run", { input: {} });
    await until(async () => (await health(srv)).workers.failing >= 3, "three failed starts", 60_000);
    const h = await health(srv);
    expect(h.lastStartError).toMatchObject({ refusing: false, onStartFailure: "queue" });
    expect((await srv.json("GET", `/v2/ep/status/${queued.id}`))[1].status).toBe("IN_QUEUE");
    expect((await srv.call("POST", "/v2/ep/run", { input: {} })).status).toBe(200);
  }, 90_000);

  test("a runsync and an OpenAI request waiting on jobs are answered at once when the endpoint fails", async () => {
    const log = new MemoryLog();
    await using srv = await failingServer(
      { handler: FIXTURE, options: { model: "/nonexistent/missing.onnx" }, openaiWaitMs: 300_000 },
      log,
    );
    const openai = srv.call("POST", "/v2/ep/openai/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi" }] });
    const [status, job] = await srv.json("POST", "/v2/ep/runsync?wait=300000", { input: {} });
    expect(status).toBe(200);
    expect(job.status).toBe("FAILED");
    expect(jobError(job).error_type).toBe("WorkerStartError");
    const answer = await openai;
    expect(answer.status).toBe(503);
    expect(((await answer.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "worker_start_failed",
      message: expect.stringMatching(/model file \/nonexistent\/missing\.onnx not found/),
    });
  }, 90_000);

  test("a worker that connects itself reports its start failure on a ping; its next request clears it", async () => {
    await using srv = await startTestServer({ endpoints: { ext: { startFailureLimit: 1, startFailureWindowMs: 0 } } });
    const [, queued] = await srv.json("POST", "/v2/ext/run", { input: {} });
    const worker = Bun.spawn(
      [
        process.execPath,
        resolve(import.meta.dir, "../../../runtime/cli.ts"),
        "worker",
        FIXTURE,
        "--no-supervise",
        "--url",
        srv.url,
        "--endpoint",
        "ext",
        "--worker-id",
        "outside-1",
      ],
      {
        env: { ...process.env, SPOOL_API_KEY: srv.key, SPOOL_HANDLER_OPTIONS: JSON.stringify({ model: "/nonexistent/model.gguf" }) },
        stdout: "ignore",
        stderr: "ignore",
      },
    );
    expect(await worker.exited).toBe(1);
    const h = (await srv.json("GET", "/v2/ext/health"))[1];
    expect(h.workers.failing).toBe(1);
    expect(h.lastStartError).toMatchObject({ message: "Error: model file /nonexistent/model.gguf not found", attempts: 1, refusing: true });
    const [, job] = await srv.json("GET", `/v2/ext/status/${queued.id}`);
    expect([job.status, jobError(job).error_type]).toEqual(["FAILED", "WorkerStartError"]);
    expect((await srv.call("POST", "/v2/ext/run", { input: {} })).status).toBe(503);
    // A worker that is up (any worker request) clears it.
    await protocolWorker(srv, "ext", "outside-2").take();
    expect((await srv.json("GET", "/v2/ext/health"))[1].lastStartError).toBeUndefined();
    expect((await srv.call("POST", "/v2/ext/run", { input: {} })).status).toBe(200);
  });
});
