import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { DUTIES_LEASE } from "../../runtime/server/jobs/maintenance.ts";
import { createStore } from "../../runtime/server/store/create-store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../fixtures/start-fails-fixture.ts");
const RETENTION = { syncMs: 60_000, asyncMs: 60_000 };

test("two servers on Redis see the same failing endpoint: both refuse with 503, the one taking over scaling keeps trying, and both accept once a worker starts", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-start-shared-"));
  const clock = new ManualClock(Date.now());
  const url = `${await redisUrl()}?prefix=startfail-${crypto.randomUUID().slice(0, 8)}`;
  // Neither server holds the scaling lease by itself: the test plays the holder with tick().
  const lease = await createStore(url, { retention: RETENTION });
  expect(await lease.tryLease(DUTIES_LEASE, "the test", 86_400_000, clock.now())).toBe(true);
  const model = join(dir, "model.onnx");
  const server = async () =>
    startTestServer({
      clock,
      store: await createStore(url, { retention: RETENTION }),
      server: { scaleIntervalMs: 3_600_000 },
      // The test polls /run and /status while it waits, and the manual clock never moves the
      // rate-limit window on: the specification's 1000 runs per window could run out.
      endpoints: {
        ep: {
          handler: FIXTURE,
          options: { model },
          startFailureLimit: 1,
          startFailureWindowMs: 0,
          rateLimits: { status: { requests: 1_000_000 }, run: { requests: 1_000_000 } },
        },
      },
    });
  const runStatus = async (srv: TestServer) => (await srv.call("POST", "/v2/ep/run", { input: {} })).status;
  try {
    await using a = await server();
    await using b = await server();
    const queued = (await b.json("POST", "/v2/ep/run", { input: {} }))[1].id;
    await a.server.scaler.tick(); // a holds the lease: its worker fails to start
    await until(async () => (await b.json("GET", `/v2/ep/status/${queued}`))[1].status === "FAILED", "the job to fail");

    // b never started a worker, yet refuses like a, and reports the same failure.
    await until(async () => (await runStatus(b)) === 503, "b to refuse submissions");
    expect(await runStatus(a)).toBe(503);
    const [ha, hb] = [(await a.json("GET", "/v2/ep/health"))[1], (await b.json("GET", "/v2/ep/health"))[1]];
    expect(hb.lastStartError).toEqual(ha.lastStartError);
    expect(hb.lastStartError).toMatchObject({ attempts: 1, refusing: true, permanent: false });

    // The lease moves to b: with nothing queued, it still tries a worker, since the endpoint fails.
    writeFileSync(model, "weights");
    await b.server.scaler.tick();
    expect(b.server.scaler.running("ep").length).toBe(1);
    await until(async () => (await runStatus(b)) === 200, "b to accept once its worker started");
    await until(async () => (await runStatus(a)) === 200, "a to accept too");
    expect((await a.json("GET", "/v2/ep/health"))[1].lastStartError).toBeUndefined();
  } finally {
    await lease.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
