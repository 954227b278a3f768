import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { createStore } from "../../runtime/server/store/create-store.ts";
import type { Store } from "../../runtime/server/store/store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

const RETENTION = { syncMs: 60_000, asyncMs: 1_800_000 };
const STORES: Record<string, () => Promise<Store | undefined>> = {
  sqlite: async () => undefined, // the test server's own embedded store
  redis: async () => createStore(`${await redisUrl()}?prefix=identity-${crypto.randomUUID().slice(0, 8)}`, { retention: RETENTION }),
};
const open = { rateLimits: { requests: { requests: 1_000_000 } } };

/**
 * Endpoint a's worker `wa` (key A) runs job `ja`, `qa` is queued on a; endpoint b's worker `wb`
 * (key B) runs `jb` and owes a stop for `jc`, which was cancelled while it ran; `qb` is queued on b.
 */
async function twoTenants(srv: TestServer, clock: ManualClock) {
  const now = clock.now();
  const keyA = (await createKey(srv.store, "worker-a", now, { scope: "worker", endpoints: ["a"] })).key;
  const keyA2 = (await createKey(srv.store, "worker-a2", now, { scope: "worker", endpoints: ["a"] })).key;
  const keyB = (await createKey(srv.store, "worker-b", now, { scope: "worker", endpoints: ["b"] })).key;
  const submit = async (ep: string) => (await srv.json("POST", `/v2/${ep}/run`, { input: {} }))[1].id as string;
  const take = async (ep: string, worker: string, key: string) => {
    const res = await srv.call("GET", `/v2/${ep}/job-take/${worker}`, undefined, { auth: key });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  };
  const ids = { ja: await submit("a"), jb: await submit("b"), jc: await submit("b"), qa: "", qb: "" };
  expect(await take("a", "wa", keyA)).toBe(ids.ja);
  expect(await take("b", "wb", keyB)).toBe(ids.jb);
  expect(await take("b", "wb", keyB)).toBe(ids.jc);
  expect((await srv.json("POST", `/v2/b/cancel/${ids.jc}`))[0]).toBe(200);
  ids.qa = await submit("a");
  ids.qb = await submit("b");
  // Past the ping grace: a heartbeat of wb that left jb out would lose it now.
  clock.advance(srv.server.config.server.pingGraceMs + 1);
  return { keyA, keyA2, keyB, ids };
}

/** What another tenant's request must not change: both endpoints' jobs, streams and workers. */
async function state(srv: TestServer, ids: Record<string, string>) {
  const now = srv.clock.now();
  const jobs: Record<string, unknown> = {};
  for (const [name, id] of Object.entries(ids)) {
    const ep = name.endsWith("a") ? "a" : "b";
    const read = await srv.store.readChunks(ep, id, 0, now);
    jobs[name] = read && {
      status: read.job.status,
      workerId: read.job.workerId,
      losses: read.job.losses,
      progress: read.job.progress,
      chunks: read.chunks,
    };
  }
  const workers = { a: (await srv.store.health("a", now, 60_000)).workers, b: (await srv.store.health("b", now, 60_000)).workers };
  return { jobs, workers };
}

type Call = { method: string; path: string; body?: string };

/** Every worker route, naming worker `w` and job `j` of endpoint `ep`. */
const ROUTES: Record<string, (ep: string, w: string, j: string) => Call> = {
  "job-take": (ep, w) => ({ method: "GET", path: `/v2/${ep}/job-take/${w}` }),
  "job-take-batch": (ep, w) => ({ method: "GET", path: `/v2/${ep}/job-take-batch/${w}?batch_size=4` }),
  "job-done progress": (ep, w, j) => ({
    method: "POST",
    path: `/v2/${ep}/job-done/${w}/${j}`,
    body: JSON.stringify({ status: "IN_PROGRESS", output: "half" }),
  }),
  "job-done result": (ep, w, j) => ({ method: "POST", path: `/v2/${ep}/job-done/${w}/${j}`, body: JSON.stringify({ output: "stolen" }) }),
  "job-stream": (ep, w, j) => ({ method: "POST", path: `/v2/${ep}/job-stream/${w}/${j}`, body: JSON.stringify({ output: "x" }) }),
  ping: (ep, w) => ({ method: "GET", path: `/v2/${ep}/ping/${w}` }),
  "ping listing the job": (ep, w, j) => ({ method: "GET", path: `/v2/${ep}/ping/${w}?job_id=${j}` }),
  "job-stop": (ep, w) => ({ method: "GET", path: `/v2/${ep}/job-stop/${w}` }),
  "job-files": (ep, w, j) => ({ method: "PUT", path: `/v2/${ep}/job-files/${w}/${j}/out.txt`, body: "file" }),
};
/** Routes that name a job: the fourth column of the matrix. */
const NAMES_JOB = new Set(["job-done progress", "job-done result", "job-stream", "job-files"]);

for (const [storeName, makeStore] of Object.entries(STORES)) {
  describe(`worker identity (${storeName})`, () => {
    test("every worker route x {another endpoint's worker, another key's worker, another endpoint's job}: 404, nothing changed; the own worker is answered", async () => {
      const clock = new ManualClock();
      await using srv = await startTestServer({ clock, store: await makeStore(), endpoints: { a: open, b: open } });
      const { keyA, keyA2, keyB, ids } = await twoTenants(srv, clock);
      const send = async (c: Call, key: string) => {
        const res = await srv.call(c.method, c.path, c.body, { auth: key });
        return { status: res.status, body: await res.json().catch(() => null) };
      };
      const before = await state(srv, ids);
      const answers: Record<string, unknown> = {};
      for (const [route, call] of Object.entries(ROUTES)) {
        answers[`${route}: another endpoint's worker`] = await send(call("a", "wb", ids.jb), keyA);
        answers[`${route}: another key's worker`] = await send(call("a", "wa", ids.ja), keyA2);
        if (NAMES_JOB.has(route)) answers[`${route}: another endpoint's job`] = await send(call("a", "wa", ids.jb), keyA);
        expect(await state(srv, ids)).toEqual(before);
      }
      const expected: Record<string, unknown> = {};
      for (const route of Object.keys(ROUTES)) {
        expected[`${route}: another endpoint's worker`] = { status: 404, body: { error: "worker wb not found" } };
        expected[`${route}: another key's worker`] = { status: 404, body: { error: "worker wa not found" } };
        const job = route === "job-files" ? `job ${ids.jb} is not running on worker wa` : `job ${ids.jb} not found for worker wa`;
        if (NAMES_JOB.has(route)) expected[`${route}: another endpoint's job`] = { status: 404, body: { error: job } };
      }
      expect(answers).toEqual(expected);

      // The owners are answered as before: a's worker works its job, b's takes its stop.
      const own: Record<string, number> = {};
      for (const route of [
        "job-stream",
        "job-done progress",
        "job-files",
        "ping listing the job",
        "job-stop",
        "job-done result",
        "job-take",
        "job-take-batch",
      ]) {
        own[route] = (await send(ROUTES[route]!("a", "wa", ids.ja), keyA)).status;
      }
      expect(own).toEqual({
        "job-stream": 200,
        "job-done progress": 200,
        "job-files": 200,
        "ping listing the job": 200,
        "job-stop": 204,
        "job-done result": 200,
        "job-take": 200,
        "job-take-batch": 204,
      });
      expect((await send(ROUTES["job-stop"]!("b", "wb", ""), keyB)).body).toEqual({ jobsToStop: [ids.jc] });
      expect(await state(srv, ids)).toMatchObject({
        jobs: {
          ja: { status: "COMPLETED" },
          jb: { status: "IN_PROGRESS", workerId: "wb", losses: 0, chunks: [] },
          qa: { status: "IN_PROGRESS", workerId: "wa" },
          qb: { status: "IN_QUEUE" },
        },
      });
    });

    test("a worker key of endpoint a pinging b's busy worker with no job_id: 404, and b's job keeps running", async () => {
      const clock = new ManualClock();
      await using srv = await startTestServer({ clock, store: await makeStore(), endpoints: { a: open, b: open } });
      const { keyA, keyB, ids } = await twoTenants(srv, clock);
      const res = await srv.call("GET", "/v2/a/ping/wb", undefined, { auth: keyA });
      expect([res.status, await res.json()]).toEqual([404, { error: "worker wb not found" }]);
      expect(await srv.store.get("b", ids.jb, clock.now())).toMatchObject({ status: "IN_PROGRESS", workerId: "wb", losses: 0 });
      // Its own worker's ping, listing it, is answered and keeps it too.
      expect((await srv.call("GET", `/v2/b/ping/wb?job_id=${ids.jb}`, undefined, { auth: keyB })).status).toBe(200);
      expect(await srv.store.get("b", ids.jb, clock.now())).toMatchObject({ status: "IN_PROGRESS", losses: 0 });
    });
  });
}
