import { expect, test } from "bun:test";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { MemoryLog } from "../../../runtime/log.ts";
import { LocalProcessProvider } from "../../../runtime/server/scaling/local-process-provider.ts";
import type { WorkerHandle, WorkerSpec } from "../../../runtime/server/scaling/worker-provider.ts";
import { RedisStore } from "../../../runtime/server/store/redis/redis-store.ts";
import { startOwnRedis } from "../../helpers/redis-server.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";
import { RETENTION } from "../../store/store-suite.ts";

const HOLD = resolve(import.meta.dir, "../../fixtures/hold-fixture.ts");

/** Local worker processes whose handles the test keeps, to end one itself. */
class KeptProvider extends LocalProcessProvider {
  readonly handles: WorkerHandle[] = [];
  override start(spec: WorkerSpec): WorkerHandle {
    const handle = super.start(spec);
    this.handles.push(handle);
    return handle;
  }
}

/** A port nothing listens on (taken, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

// The store is made to fail by turning Redis into a read-only replica (as a failover does to the
// old primary), which refuses every write at once: no reply timeout decides when the failure
// comes, however loaded the machine.
test("a worker that exits while Redis refuses writes (the store fails inside the scaler's exit path) is logged, and the server goes on answering", async () => {
  await using redis = await startOwnRedis();
  const store = await RedisStore.connect(redis.url, { retention: RETENTION }, "{exitpath}:");
  const log = new MemoryLog();
  const provider = new KeptProvider();
  await using srv = await startTestServer({
    store,
    log,
    provider,
    server: { scaleIntervalMs: 3_600_000 },
    endpoints: { ep: { handler: HOLD, workersMin: 1 } },
  });
  await until(() => provider.handles.length === 1, "the scaler to start the floor's worker");
  // Seen by the store (it has asked for work), so that forgetting it is a write.
  await until(async () => (await srv.json("GET", "/v2/ep/health"))[1].workers.idle === 1, "the worker to ask for work");
  const admin = new Bun.RedisClient(redis.url);
  await admin.send("REPLICAOF", ["127.0.0.1", String(await closedPort())]);
  try {
    provider.handles[0]!.kill();
    await provider.handles[0]!.exited;
    await until(() => log.lines.some((l) => l.includes("could not forget an ended worker")), "the failure to be logged");
  } finally {
    await admin.send("REPLICAOF", ["NO", "ONE"]);
    admin.close();
  }
  await until(async () => (await srv.call("GET", "/v2/ep/health")).status === 200, "the server to answer once Redis takes writes again");
  const line = JSON.parse(log.lines.find((l) => l.includes("could not forget an ended worker"))!);
  expect(line).toMatchObject({
    level: "warn",
    endpointId: "ep",
    error: "StoreUnavailableError: Redis is a read-only replica (after a failover?)",
  });
});
