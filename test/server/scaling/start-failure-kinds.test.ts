import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../../runtime/clock.ts";
import type { ConfigInput } from "../../../runtime/config/config.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../../fixtures/start-fails-fixture.ts");
type Endpoints = NonNullable<ConfigInput["endpoints"]>;

/**
 * Real worker processes on a manual clock: the scaler starts one when a job is queued, and again
 * only when the test moves time past the backoff and ticks, so each failed start is one the test made.
 */
async function server(clock: ManualClock, endpoints: Endpoints): Promise<TestServer> {
  const limits = { rateLimits: { status: { requests: 1_000_000 }, run: { requests: 1_000_000 } } };
  return startTestServer({
    clock,
    server: { scaleIntervalMs: 3_600_000 },
    endpoints: Object.fromEntries(Object.entries(endpoints).map(([id, ep]) => [id, { ...limits, ...ep }])),
  });
}
const health = async (srv: TestServer, ep: string) => (await srv.json("GET", `/v2/${ep}/health`))[1];
const status = async (srv: TestServer, ep: string, id: string) => (await srv.json("GET", `/v2/${ep}/status/${id}`))[1];
const jobError = (job: { error: string }) => JSON.parse(job.error) as { error_type: string; error_message: string };

describe("a handler that cannot load fails the queued jobs at its first failed start, naming the error", () => {
  test("a missing file, a syntax error, no default export, options failing their schema, PermanentStartError from setup; with onStartFailure queue the job waits", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-permanent-"));
    try {
      writeFileSync(join(dir, "broken.ts"), "export default {\n");
      writeFileSync(join(dir, "plain.ts"), "export const handler = () => 1;\n");
      const missingModel = join(dir, "model.onnx");
      const cases: Record<string, { endpoint: Endpoints[string]; error: RegExp }> = {
        missing: { endpoint: { handler: join(dir, "nowhere.ts") }, error: /^spool: handler file not found: .*nowhere\.ts/ },
        syntax: {
          endpoint: { handler: join(dir, "broken.ts") },
          error: /^spool: cannot load .*broken\.ts:1:\d+: Expected identifier but found end of file/,
        },
        noDefault: { endpoint: { handler: join(dir, "plain.ts") }, error: /plain\.ts must `export default defineHandler/ },
        options: { endpoint: { handler: FIXTURE, options: { model: 42 } }, error: /^spool: handler options: model: / },
        setup: {
          endpoint: { handler: FIXTURE, options: { model: missingModel, permanent: true } },
          error: /^spool: model file .*model\.onnx not found, and no download is configured/,
        },
      };
      const clock = new ManualClock(Date.now());
      await using srv = await server(clock, {
        ...Object.fromEntries(Object.entries(cases).map(([id, c]) => [id, c.endpoint])),
        waits: { handler: FIXTURE, options: { model: missingModel, permanent: true }, onStartFailure: "queue" },
      });
      const ids: Record<string, string> = {};
      for (const ep of [...Object.keys(cases), "waits"]) ids[ep] = (await srv.json("POST", `/v2/${ep}/run`, { input: {} }))[1].id;

      for (const [ep, c] of Object.entries(cases)) {
        const job = await until(async () => {
          const s = await status(srv, ep, ids[ep]!);
          return s.status === "FAILED" && s;
        }, `${ep}'s job to fail`);
        expect(jobError(job).error_type).toBe("WorkerStartError");
        expect(jobError(job).error_message).toStartWith(`no worker of ${ep} could start (1 failed start): `);
        const h = await health(srv, ep);
        expect([h.workers.failing, h.lastStartError.permanent, h.lastStartError.refusing, h.lastStartError.exitCode]).toEqual([
          1,
          true,
          true,
          78,
        ]);
        expect(h.lastStartError.message).toMatch(c.error);
        expect(h.lastStartError.message).toEndWith("(exited with code 78 before it was ready; trying again will not help)");
        expect((await srv.call("POST", `/v2/${ep}/run`, { input: {} })).status).toBe(503);
      }
      const waiting = await until(async () => (await health(srv, "waits")).lastStartError, "the waiting endpoint's failed start");
      expect(waiting).toMatchObject({ attempts: 1, permanent: true, refusing: false, onStartFailure: "queue" });
      expect((await status(srv, "waits", ids.waits!)).status).toBe("IN_QUEUE");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("failures that may pass (setup throws) refuse work only after startFailureLimit failures over startFailureWindowMs", () => {
  /** Moves time past the backoff and lets the scaler start the next worker; resolves once it has failed too. */
  async function nextFailedStart(srv: TestServer, clock: ManualClock, attempts: number): Promise<void> {
    clock.advance(30_000);
    await srv.server.scaler.tick();
    await until(async () => (await health(srv, "ep")).workers.failing === attempts, `failed start ${attempts}`);
  }

  test("setup throws three times and then works: past the limit but within the window, the queued job is served, not failed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "spool-window-"));
    try {
      const model = join(dir, "model.onnx");
      const clock = new ManualClock(Date.now());
      await using srv = await server(clock, { ep: { handler: FIXTURE, options: { model }, startFailureLimit: 2 } }); // window: 5 min by default
      const id = (await srv.json("POST", "/v2/ep/run", { input: {} }))[1].id;
      await until(async () => (await health(srv, "ep")).workers.failing === 1, "failed start 1");
      await nextFailedStart(srv, clock, 2);
      await nextFailedStart(srv, clock, 3);
      expect((await health(srv, "ep")).lastStartError).toMatchObject({ attempts: 3, permanent: false, refusing: false });
      expect((await status(srv, "ep", id)).status).toBe("IN_QUEUE");
      expect((await srv.call("POST", "/v2/ep/run", { input: {} })).status).toBe(200);

      writeFileSync(model, "weights"); // the download finished
      clock.advance(30_000);
      await srv.server.scaler.tick();
      const done = await until(async () => {
        const s = await status(srv, "ep", id);
        return s.status === "COMPLETED" && s;
      }, "the job to be served");
      expect(done.output).toEqual({ ok: true });
      expect((await health(srv, "ep")).lastStartError).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("with both the limit and the window reached, the queued job fails and submissions get 503", async () => {
    const clock = new ManualClock(Date.now());
    await using srv = await server(clock, {
      ep: { handler: FIXTURE, options: { model: "/nonexistent/model.onnx" }, startFailureLimit: 2, startFailureWindowMs: 60_000 },
    });
    const id = (await srv.json("POST", "/v2/ep/run", { input: {} }))[1].id;
    await until(async () => (await health(srv, "ep")).workers.failing === 1, "failed start 1");
    await nextFailedStart(srv, clock, 2); // the limit, 30 s into the window
    expect((await status(srv, "ep", id)).status).toBe("IN_QUEUE");
    expect((await health(srv, "ep")).lastStartError.refusing).toBe(false);
    await nextFailedStart(srv, clock, 3); // 60 s: the window too
    const job = await until(async () => {
      const s = await status(srv, "ep", id);
      return s.status === "FAILED" && s;
    }, "the job to fail");
    expect(jobError(job).error_message).toMatch(
      /^no worker of ep could start \(3 failed starts\): spool: model file \/nonexistent\/model\.onnx not found \(exited with code 1 before it was ready\)$/,
    );
    expect((await srv.call("POST", "/v2/ep/run", { input: {} })).status).toBe(503);
  }, 60_000);
});
