import { expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import { parseConfig } from "../../../runtime/config/config.ts";
import { JobEvents } from "../../../runtime/server/jobs/job-events.ts";
import { JobService } from "../../../runtime/server/jobs/job-service.ts";
import { RedisStore } from "../../../runtime/server/store/redis/redis-store.ts";
import { SqliteStore } from "../../../runtime/server/store/sqlite/sqlite-store.ts";
import { redisUrl } from "../../helpers/redis-server.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { RETENTION } from "../../store/store-suite.ts";
import { topics } from "../../../runtime/server/store/store-events.ts";

const stores = {
  sqlite: async () => undefined, // the test server's own
  redis: async () => RedisStore.connect(await redisUrl(), { retention: RETENTION }, `{handoff-${crypto.randomUUID().slice(0, 8)}}:`),
};

test.each(Object.keys(stores) as (keyof typeof stores)[])(
  "%s: a job submitted to a waiting worker is handed to it at once: /run says IN_QUEUE, the job runs on that worker, counts stay exact",
  async (name) => {
    const clock = new ManualClock();
    await using srv = await startTestServer({
      clock,
      store: await stores[name](),
      server: { takeWaitMs: 30_000 },
      endpoints: { echo: { executionTimeout: 9_000 } },
    });
    const w = protocolWorker(srv, "echo", "w1");
    const take = w.take();
    const [status, accepted] = await srv.json("POST", "/v2/echo/run", { input: { a: 1 } });
    expect([status, accepted.status]).toEqual([200, "IN_QUEUE"]);
    const job = await take;
    expect([job.id, job.input, job.deadline]).toEqual([accepted.id, { a: 1 }, clock.now() + 9_000]);
    expect((await srv.json("GET", `/v2/echo/status/${job.id}`))[1]).toMatchObject({ status: "IN_PROGRESS", workerId: "w1" });
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toMatchObject({ inQueue: 0, inProgress: 1 });
    await w.done(job.id, { output: { ok: true } });
    expect((await srv.json("GET", `/v2/echo/status/${job.id}`))[1]).toMatchObject({ status: "COMPLETED", output: { ok: true } });
  },
);

test("jobs submitted together to one waiting worker: it gets the first, the rest stay queued in order", async () => {
  await using srv = await startTestServer({ server: { takeWaitMs: 30_000 } });
  const w = protocolWorker(srv, "echo", "w1");
  const take = w.take();
  const sent = await Promise.all([1, 2, 3].map((i) => srv.json("POST", "/v2/echo/run", { input: { i } })));
  const ids = sent.map(([, body]) => body.id as string);
  const first = await take;
  expect(first.id).toBe(ids[0]!);
  expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toMatchObject({ inQueue: 2, inProgress: 1 });
  expect((await w.takeBatch(5)).map((j) => j.id)).toEqual(ids.slice(1));
});

test("a waiting worker whose client went away is handed nothing: the job stays queued for the next take", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const config = parseConfig({ endpoints: { ep: {} } });
  const jobs = new JobService({ store, clock, config, jobEvents: new JobEvents(() => {}) });
  const gone = new AbortController();
  const waiting = jobs.take("ep", "w-gone", 1, 60_000, gone.signal);
  await Promise.resolve();
  gone.abort();
  const job = await jobs.submit("ep", { input: { x: 1 } }, { keyId: "k", sync: false });
  expect(await waiting).toBeNull();
  expect((await store.get("ep", job.id, clock.now()))?.status).toBe("IN_QUEUE");
  expect((await jobs.take("ep", "w2", 1, 0))?.map((j) => j.id)).toEqual([job.id]);
  await store.close();
});

test("a worker whose take ran out while it was being handed a job that then queued is never handed a later one", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const policy = { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 };
  const waiting = jobs.take("ep", "w-late", 1, 1_000, new AbortController().signal); // its request stays open
  while (clock.sleeping === 0) await new Promise((r) => setImmediate(r));
  // In one turn: a job queued by another path (a retry, a lost worker's job) and a submission that
  // chooses the waiting worker, but is queued behind it; the wait runs out meanwhile.
  const queued = store.enqueue({ id: "x", endpointId: "ep", input: {}, policy, sync: false }, clock.now());
  const submitted = jobs.submit("ep", { input: { y: 1 } }, { keyId: "k", sync: false });
  await Promise.resolve();
  clock.advance(1_000);
  expect(await waiting).toBeNull();
  await Promise.all([queued, submitted]);
  expect((await jobs.take("ep", "w2", 5, 0))?.length).toBe(2);
  const later = await jobs.submit("ep", { input: { z: 1 } }, { keyId: "k", sync: false });
  expect(await store.get("ep", later.id, clock.now())).toMatchObject({ status: "IN_QUEUE" });
  await store.close();
});

test("a batch taker handed a job also gets the jobs queued beside it in the same turn", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const waiting = jobs.take("ep", "w", 8, 60_000);
  while (clock.sleeping === 0) await new Promise((r) => setImmediate(r));
  const ids = (await Promise.all([1, 2, 3].map((i) => jobs.submit("ep", { input: { i } }, { keyId: "k", sync: false })))).map((j) => j.id);
  expect((await waiting)?.map((j) => j.id)).toEqual(ids);
  expect((await store.health("ep", clock.now(), 60_000)).jobs).toMatchObject({ inQueue: 0, inProgress: 3 });
  await store.close();
});

test("a worker whose client goes away while it is being handed a job does not keep it: the job is queued again, no loss counted", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const gone = new AbortController();
  const waiting = jobs.take("ep", "w-gone", 1, 60_000, gone.signal);
  while (clock.sleeping === 0) await Promise.resolve();
  const submitted = jobs.submit("ep", { input: { x: 1 } }, { keyId: "k", sync: false });
  for (let i = 0; i < 20; i++) await Promise.resolve(); // the hand-off is chosen; its write waits for the next turn
  gone.abort();
  const job = await submitted;
  expect(await waiting).toBeNull();
  expect((await store.get("ep", job.id, clock.now()))!).toMatchObject({ status: "IN_QUEUE", losses: 0 });
  expect((await jobs.take("ep", "w2", 1, 0))?.map((j) => j.id)).toEqual([job.id]);
  await store.close();
});

test("a take that waits looks at the queue once before it parks, and a job handed to it costs no claim", async () => {
  // On Redis each claim is a round trip to the server.
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  let claims = 0;
  const claim = store.claim.bind(store);
  store.claim = (...args) => (claims++, claim(...args));
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const waiting = jobs.take("ep", "w", 1, 60_000, new AbortController().signal);
  while (clock.sleeping === 0) await new Promise((r) => setImmediate(r));
  expect(claims).toBe(1);
  const job = await jobs.submit("ep", { input: { x: 1 } }, { keyId: "k", sync: false });
  expect((await waiting)?.map((j) => j.id)).toEqual([job.id]);
  expect(claims).toBe(1);
  expect(await jobs.take("ep", "w", 1, 0)).toBeNull(); // a take that does not wait claims once too
  expect(claims).toBe(2);
  await store.close();
});

test("a hand-off whose write landed but whose answer was lost (the store went away) gives the job back: the waiting worker still gets it", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const enqueue = store.enqueue.bind(store);
  let written: string | undefined;
  store.enqueue = async (...args) => {
    written = (await enqueue(...args)).id;
    throw new Error("no answer from the store");
  };
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const waiting = jobs.take("ep", "w", 1, 60_000, new AbortController().signal);
  while (clock.sleeping === 0) await new Promise((r) => setImmediate(r));
  await expect(jobs.submit("ep", { input: { x: 1 } }, { keyId: "k", sync: false })).rejects.toThrow("no answer from the store");
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  clock.advance(60_000); // without the give-back the take would wait its full time for nothing
  expect((await waiting)?.map((j) => j.id)).toEqual([written!]);
  expect((await store.get("ep", written!, clock.now()))?.losses).toBe(0);
  await store.close();
});

test("the longest-waiting worker is handed the next job, though another finished looking at the queue again after it", async () => {
  const clock = new ManualClock();
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const claim = store.claim.bind(store);
  let holdA: PromiseWithResolvers<void> | undefined;
  store.claim = async (endpointId, workerId, ...rest) => {
    if (workerId === "A" && holdA) await holdA.promise;
    return claim(endpointId, workerId, ...rest);
  };
  const jobs = new JobService({ store, clock, config: parseConfig({ endpoints: { ep: {} } }), jobEvents: new JobEvents(() => {}) });
  const settle = async (sleepers: number) => {
    while (clock.sleeping !== sleepers) await new Promise((r) => setImmediate(r));
  };
  const a = jobs.take("ep", "A", 1, 60_000, new AbortController().signal);
  await settle(1);
  const b = jobs.take("ep", "B", 1, 60_000, new AbortController().signal);
  await settle(2);
  // Both look at the queue again (an announcement); A's look ends after B's.
  holdA = Promise.withResolvers();
  store.events.emit(topics.queue("ep"));
  await settle(1);
  holdA.resolve();
  await settle(2);
  const job = await jobs.submit("ep", { input: { x: 1 } }, { keyId: "k", sync: false });
  await settle(1); // the one handed the job has stopped waiting
  clock.advance(60_000); // the other's wait runs out
  expect([(await a)?.map((j) => j.id), await b]).toEqual([[job.id], null]);
  await store.close();
});
