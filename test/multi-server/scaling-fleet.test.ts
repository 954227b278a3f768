import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { DUTIES_LEASE } from "../../runtime/server/jobs/maintenance.ts";
import { createStore } from "../../runtime/server/store/create-store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { spawnProcess } from "../helpers/spawned.ts";
import { until } from "../helpers/until.ts";

const HOLD = resolve(import.meta.dir, "../fixtures/hold-fixture.ts");
const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");
const RETENTION = { syncMs: 60_000, asyncMs: 60_000 };
const ENDPOINT = {
  handler: HOLD,
  workersMax: 2,
  scalerType: "REQUEST_COUNT" as const,
  scalerValue: 1,
  idleTimeout: 1,
  rateLimits: { status: { requests: 1_000_000 } },
};

/** A server on the shared Redis store, with real worker processes; its scaler decides when the test says. */
async function server(url: string, clock: ManualClock): Promise<TestServer> {
  return startTestServer({
    clock,
    store: await createStore(url, { retention: RETENTION }),
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 },
    endpoints: { ep: ENDPOINT },
  });
}
const workers = async (srv: TestServer) => (await srv.json("GET", "/v2/ep/health"))[1].workers;

test("two servers on Redis: the scaler counts the endpoint's workers from the store, so a new lease holder starts none past workersMax, and the old holder still stops its idle ones", async () => {
  const clock = new ManualClock(Date.now());
  const url = `${await redisUrl()}?prefix=fleet-${crypto.randomUUID().slice(0, 8)}`;
  // Neither server holds the scaling lease by itself: the test plays the holder with tick().
  const lease = await createStore(url, { retention: RETENTION });
  expect(await lease.tryLease(DUTIES_LEASE, "the test", 86_400_000, clock.now())).toBe(true);
  await using a = await server(url, clock);
  await using b = await server(url, clock);
  try {
    for (let i = 0; i < 4; i++) await a.json("POST", "/v2/ep/run", { input: { hold: true } });
    await a.server.scaler.tick(); // a holds the lease
    expect(a.server.scaler.running("ep").length).toBe(2);
    await until(async () => (await workers(a)).running === 2, "a's 2 workers running jobs");

    await b.server.scaler.tick(); // the lease moved to b: 2 jobs still queued, and workersMax is 2
    expect(b.server.scaler.running("ep")).toEqual([]);
    expect(await workers(b)).toEqual({ idle: 0, running: 2, initializing: 0, unhealthy: 0 });

    // The jobs end: a's workers are idle. b, the holder, cannot stop them; a stops its own.
    await a.json("POST", "/v2/ep/purge-queue");
    const ids = (await a.json("GET", "/v2/ep/requests?status=IN_PROGRESS"))[1].requests.map((r: { id: string }) => r.id);
    for (const id of ids) await a.json("POST", `/v2/ep/cancel/${id}`);
    await until(async () => (await workers(a)).idle === 2, "a's 2 workers idle");
    // A cancelled job's process is ending, not idle, until it reports the job ended (on its
    // watch channel, which can be read after its next request).
    await until(() => a.server.scaler.stopping("ep") === 0, "a to hear that its workers' cancelled jobs ended");
    clock.advance(ENDPOINT.idleTimeout * 1000);
    await b.server.scaler.tick();
    expect(b.server.scaler.running("ep")).toEqual([]);
    await a.server.scaler.retireIdle(); // what a's loop does when it does not hold the lease
    expect(a.server.scaler.running("ep")).toEqual([]);
    await until(async () => (await workers(a)).idle === 0, "a's workers to exit");
  } finally {
    await lease.close();
  }
});

test("two servers on Redis with workersMin 1: a server without the lease stops its idle worker only when the others' kept workers hold the floor, so the fleet never drops below workersMin", async () => {
  const clock = new ManualClock(Date.now());
  const url = `${await redisUrl()}?prefix=fleet-${crypto.randomUUID().slice(0, 8)}`;
  const lease = await createStore(url, { retention: RETENTION });
  expect(await lease.tryLease(DUTIES_LEASE, "the test", 86_400_000, clock.now())).toBe(true);
  const endpoints = { ep: { ...ENDPOINT, workersMin: 1 } };
  const server = async () =>
    startTestServer({
      clock,
      store: await createStore(url, { retention: RETENTION }),
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 },
      endpoints,
    });
  await using a = await server();
  await using b = await server();
  try {
    // One worker on each server, each running a job.
    const first = (await a.json("POST", "/v2/ep/run", { input: { hold: true } }))[1].id;
    await a.server.scaler.tick();
    await until(async () => (await workers(a)).running === 1, "a's worker running its job");
    const second = (await a.json("POST", "/v2/ep/run", { input: { hold: true } }))[1].id;
    await b.server.scaler.tick();
    await until(async () => (await workers(a)).running === 2, "b's worker running its job");
    expect([a.server.scaler.running("ep").length, b.server.scaler.running("ep").length]).toEqual([1, 1]);

    // Both idle past idleTimeout; the floor is 1. b (the holder) may stop its own, so a keeps its.
    for (const id of [first, second]) await a.json("POST", `/v2/ep/cancel/${id}`);
    await until(async () => (await workers(a)).idle === 2, "both workers idle");
    // A cancelled job's process is ending, not idle, until it reports the job ended (on its
    // watch channel, which can be read after its next request).
    await until(
      () => a.server.scaler.stopping("ep") + b.server.scaler.stopping("ep") === 0,
      "both servers to hear that the cancelled jobs ended",
    );
    clock.advance(ENDPOINT.idleTimeout * 1000);
    await a.server.scaler.retireIdle();
    expect(a.server.scaler.running("ep").length).toBe(1);
    await b.server.scaler.tick();
    expect(b.server.scaler.running("ep")).toEqual([]);
    await until(async () => (await workers(a)).idle === 1 && b.server.scaler.stopping("ep") === 0, "b's worker to exit");
    await a.server.scaler.retireIdle();
    expect(a.server.scaler.running("ep").length).toBe(1);
  } finally {
    await lease.close();
  }
});

test("two `spool serve` on Redis: after the lease holder is killed, the new holder replaces its workers without passing workersMax, and stops them once idle", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-fleet-"));
  const store = `${await redisUrl()}?prefix=fleet-${crypto.randomUUID().slice(0, 8)}`;
  try {
    await Bun.write(
      join(dir, "spool.toml"),
      `[server]
sweepIntervalMs = 100
scaleIntervalMs = 100
stopWaitMs = 200
workerLossTimeoutMs = 3000
rateWindowMs = 600000

[endpoints.ep]
handler = "${HOLD}"
workersMax = 2
scalerType = "REQUEST_COUNT"
scalerValue = 1
idleTimeout = 1
rateLimits = { requests = { requests = 1000000 } }
`,
    );
    const made = Bun.spawnSync([process.execPath, CLI, "keys", "create", "--name", "fleet", "--store", store, "--data", join(dir, "keys")]);
    const key = made.stdout.toString().trim().split("\n").at(-1)!;
    const serve = async (i: number) => {
      const proc = spawnProcess(
        [
          process.execPath,
          CLI,
          "serve",
          "--port",
          "0",
          "--data",
          join(dir, `data-${i}`),
          "--config",
          join(dir, "spool.toml"),
          "--store",
          store,
        ],
        {
          env: { ...process.env, RUNPOD_PING_INTERVAL: "200" }, // workers heard from all the time: a's stay in the store until the loss timeout
        },
      );
      const [, url] = await proc.waitFor(/Spool listening on (\S+)/);
      return Object.assign(proc, { url: url! });
    };
    const call = async (url: string, method: string, path: string) =>
      (
        await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}` },
          body: method === "POST" && path.endsWith("/run") ? '{"input":{"hold":true}}' : undefined,
        })
      ).json() as Promise<any>;
    /** The fleet as a server sees it: workers heard from, and its own not heard from yet. */
    const fleet = async (url: string) => {
      const { workers } = await call(url, "GET", "/v2/ep/health");
      return workers.idle + workers.running + workers.unhealthy + workers.initializing;
    };

    await using a = await serve(0);
    for (let i = 0; i < 4; i++) await call(a.url, "POST", "/v2/ep/run");
    await until(async () => (await call(a.url, "GET", "/v2/ep/health")).workers.running === 2, "a's 2 workers running jobs", 30_000);
    const running = async (url: string) =>
      ((await call(url, "GET", "/v2/ep/requests?status=IN_PROGRESS")).requests as { workerId: string }[]).map((r) => r.workerId);
    const aWorkers = await running(a.url);
    await using b = await serve(1);
    a.proc.kill("SIGKILL");
    await a.proc.exited;

    // b takes the lease, loses a's workers' jobs back to the queue and starts its own: never more than 2.
    let most = 0;
    await until(
      async () => {
        most = Math.max(most, await fleet(b.url));
        const now = await running(b.url);
        return now.length === 2 && !now.some((w) => aWorkers.includes(w));
      },
      "2 of b's workers running jobs",
      30_000,
    );
    expect(most).toBeLessThanOrEqual(2);

    await call(b.url, "POST", "/v2/ep/purge-queue");
    for (const r of (await call(b.url, "GET", "/v2/ep/requests?status=IN_PROGRESS")).requests)
      await call(b.url, "POST", `/v2/ep/cancel/${r.id}`);
    await until(async () => (await fleet(b.url)) === 0, "b's idle workers to be stopped", 30_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);
