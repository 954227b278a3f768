import { describe, expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { parseConfig } from "../../../runtime/config/config.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "../../../runtime/server/scaling/worker-provider.ts";
import { GatedProvider } from "../../helpers/gated-provider.ts";
import { Exposition } from "../../helpers/prometheus.ts";
import { spawnProcess } from "../../helpers/spawned.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const ROOT = resolve(import.meta.dir, "../../..");
const CLI = join(ROOT, "runtime/cli.ts");
const ECHO = join(ROOT, "handlers/examples/echo.ts");

/** Records which endpoints the scaler asked for workers; the workers themselves never start. */
class RecordingProvider implements WorkerProvider {
  readonly started: string[] = [];
  readonly #inner = new GatedProvider({ closed: true });
  start(spec: WorkerSpec): WorkerHandle {
    this.started.push(spec.endpointId);
    return this.#inner.start(spec);
  }
}

/** A worker process started by hand, as a pod or another host would run it. */
const outsideWorker = (url: string, key: string, endpoint: string, workerId: string, env: Record<string, string> = {}) =>
  spawnProcess([process.execPath, CLI, "worker", ECHO, "--url", url, "--endpoint", endpoint, "--worker-id", workerId], {
    env: { PATH: process.env.PATH, SPOOL_API_KEY: key, ...env },
  });

const desiredMetric = async (srv: TestServer, endpoint: string) =>
  new Exposition(await (await srv.call("GET", "/metrics")).text()).value("spool_desired_workers", { endpoint });

describe('provider = "external"', () => {
  test("server-wide: the scaler starts nothing even for workersMin; a worker from outside is reported and runs jobs", async () => {
    const provider = new RecordingProvider();
    await using srv = await startTestServer({
      provider,
      server: { provider: "external", takeWaitMs: 20_000 },
      endpoints: { echo: { handler: ECHO, workersMin: 2 } },
    });
    await srv.server.scaler.tick();
    expect(srv.server.scaler.endpoints).toEqual([]);
    expect(provider.started).toEqual([]);

    await using _pod = outsideWorker(srv.url, srv.key, "echo", "pod-1");
    await until(async () => (await srv.json("GET", "/v2/echo/health"))[1].workers.idle === 1, "the outside worker in /health");
    const [, done] = await srv.json("POST", "/v2/echo/runsync", { input: { from: "outside" } });
    expect(done).toMatchObject({ status: "COMPLETED", output: { from: "outside" }, workerId: "pod-1" });
    expect((await srv.json("GET", "/v2/echo/scaling"))[1]).toMatchObject({ workers: 1, desiredWorkers: 2 });
    expect(provider.started).toEqual([]);
  });

  test("per endpoint: an external endpoint gets no workers while a local one on the same server does", async () => {
    const provider = new RecordingProvider();
    await using srv = await startTestServer({
      provider,
      server: { scaleIntervalMs: 3_600_000 },
      endpoints: { gpu: { handler: ECHO, workersMin: 1, provider: "external" }, cpu: { handler: ECHO, workersMin: 1 } },
    });
    await srv.server.scaler.tick();
    expect(srv.server.scaler.endpoints).toEqual(["cpu"]);
    expect(provider.started).toEqual(["cpu"]);
  });

  test("a worker with SPOOL_EXIT_WHEN_IDLE_MS runs the queued job, then exits 0 once idle (a ScaledJob's pod ends)", async () => {
    await using srv = await startTestServer({ server: { provider: "external" }, endpoints: { echo: {} } });
    const [, job] = await srv.json("POST", "/v2/echo/run", { input: { n: 1 } });
    await using pod = outsideWorker(srv.url, srv.key, "echo", "job-pod", { SPOOL_EXIT_WHEN_IDLE_MS: "1" });
    expect(await pod.proc.exited).toBe(0);
    await pod.waitFor(/idle; exiting/);
    expect((await srv.json("GET", `/v2/echo/status/${job.id}`))[1]).toMatchObject({
      status: "COMPLETED",
      output: { n: 1 },
      workerId: "job-pod",
    });
  });

  test("an endpoint with a handler on the external provider: a worker's start-failure report counts, and /scaling still asks for one worker once its jobs failed", async () => {
    const provider = new RecordingProvider();
    await using srv = await startTestServer({
      provider,
      endpoints: { ext: { handler: ECHO, provider: "external", startFailureLimit: 1, startFailureWindowMs: 0 } },
    });
    const [, queued] = await srv.json("POST", "/v2/ext/run", { input: {} });
    expect((await srv.json("GET", "/v2/ext/scaling"))[1]).toMatchObject({ queued: 1, desiredWorkers: 1 });

    const report = await srv.call("GET", "/v2/ext/ping/pod-1?status=start_failed&reason=Error%3A%20weights%20missing", undefined, {
      auth: srv.key,
    });
    expect(report.status).toBe(200);
    const health = (await srv.json("GET", "/v2/ext/health"))[1];
    expect(health.lastStartError).toMatchObject({ message: "Error: weights missing", attempts: 1, refusing: true });
    expect((await srv.json("GET", `/v2/ext/status/${queued.id}`))[1].status).toBe("FAILED");
    // Nothing queued, yet one worker is wanted: an autoscaler following desiredWorkers keeps trying.
    expect((await srv.json("GET", "/v2/ext/scaling"))[1]).toMatchObject({ queued: 0, inProgress: 0, workers: 0, desiredWorkers: 1 });
    expect(await desiredMetric(srv, "ext")).toBe(1);
    expect(provider.started).toEqual([]);
  });

  test("a provider other than local or external is a config error naming the setting", () => {
    expect(() => parseConfig({ server: { provider: "kubernetes" } }, "spool.toml")).toThrow(
      'spool.toml: server.provider: Invalid option: expected one of "local"|"external"',
    );
    expect(() => parseConfig({ endpoints: { gpu: { provider: "k8s" } } }, "spool.toml")).toThrow(
      'spool.toml: endpoints.gpu.provider: Invalid option: expected one of "local"|"external"',
    );
  });
});
