import { describe, expect, test } from "bun:test";
import { until } from "../../helpers/until.ts";
import { seededRandom } from "../../helpers/seeded-random.ts";
import { chaosSeed, spoolCluster, type SpoolProcess, type StoreKind } from "./spool-process.ts";

// kill -9 of a server while clients submit and workers take and finish jobs: every job whose
// /run was answered 200 must survive and complete exactly once, whatever was cut off mid-request.
// The plan comes from a fixed seed unless SPOOL_CHAOS_SEED gives another.

const CONFIG = `
[server]
takeWaitMs = 200
pingGraceMs = 300
sweepIntervalMs = 100

[endpoints.echo]
`;
const CLIENTS = 4;
const WORKERS = 3;
/** What the test is for: a kill that cuts off a submission and a result the server was given. */
const CASE = ["run", "job-done"];
/** Kills before the test gives up on meeting CASE, and accepted jobs before it gives up on arming. */
const MAX_KILLS = 10;
const MAX_ACCEPTED = 500;

interface Tally {
  /** id -> the n it was submitted with, for every /run answered 200. */
  accepted: Map<string, number>;
  /** Requests cut off by a kill (no answer), by kind: run, job-take, job-stream, job-done, ping. */
  cutOff: Record<string, number>;
  /** Answers other than 200 (and 204 to a take), as "METHOD path-kind STATUS". */
  otherAnswers: string[];
  /** Ids a worker was handed after its job-done for them had been answered 200. */
  takenAfterDone: string[];
}

async function chaosRun(kind: StoreKind, servers: number) {
  const seed = chaosSeed(`in-flight kill on ${kind}`);
  const plan = seededRandom(seed);
  const killAfter = 15 + Math.floor(plan() * 30);
  const target = killAfter + 20 + Math.floor(plan() * 20);
  const victim = Math.floor(plan() * servers);

  await using cluster = await spoolCluster(kind, servers, CONFIG);
  const { key, nodes } = cluster;
  const tally: Tally = { accepted: new Map(), cutOff: {}, otherAnswers: [], takenAfterDone: [] };
  const done = new Set<string>();
  /** Requests sent to the victim and not yet answered, by kind. */
  const victimInFlight: Record<string, number> = {};
  const inFlight = () => Object.values(victimInFlight).reduce((a, b) => a + b, 0);
  const inFlightAtKills: Record<string, number>[] = [];
  const met = () => CASE.every((route) => (tally.cutOff[route] ?? 0) > 0);
  let armed = false;
  /** Set once a kill met CASE, or MAX_KILLS did not: the clients may then stop. */
  let settled = false;
  let chaos: Promise<void> | undefined;
  let stopClients = false;
  let stopWorkers = false;

  // Once armed, the kill comes when the victim holds a submission and a result unanswered. When
  // it cut off no request of one of those kinds (each may have been answered first), it is armed
  // again, so that a run that never met its case fails instead of passing.
  const killMidFlight = () => {
    armed = false;
    inFlightAtKills.push({ ...victimInFlight });
    chaos = (async () => {
      await nodes[victim]!.kill9();
      // Every request sent before the kill has now failed or been answered; no new one is sent
      // to the victim until it is up again.
      await until(() => inFlight() === 0, "the requests in flight at the kill to end");
      await nodes[victim]!.restart();
      if (met() || inFlightAtKills.length === MAX_KILLS) settled = true;
      else armed = true;
    })();
  };

  /** One request to a node; undefined when the kill cut it off (after which the node is up again). */
  async function call(node: SpoolProcess, method: string, path: string, auth: string, body?: unknown): Promise<Response | undefined> {
    await node.up;
    const route = path.split("/")[3]!;
    const answer = fetch(`${node.url}${path}`, {
      method,
      headers: { authorization: auth },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const onVictim = node === nodes[victim];
    if (onVictim) {
      victimInFlight[route] = (victimInFlight[route] ?? 0) + 1;
      if (armed && CASE.every((r) => victimInFlight[r])) killMidFlight();
    }
    try {
      return await answer;
    } catch {
      tally.cutOff[route] = (tally.cutOff[route] ?? 0) + 1;
      return undefined;
    } finally {
      if (onVictim) victimInFlight[route]!--;
    }
  }

  async function client(i: number) {
    const rand = seededRandom(seed + 1 + i);
    for (let n = i; !stopClients; n += CLIENTS) {
      const res = await call(nodes[Math.floor(rand() * servers)]!, "POST", "/v2/echo/run", `Bearer ${key}`, { input: { n } });
      if (!res) continue;
      const body = (await res.json()) as { id: string };
      if (res.status !== 200) {
        tally.otherAnswers.push(`POST run ${res.status}`);
        continue;
      }
      tally.accepted.set(body.id, n);
      if (tally.accepted.size === killAfter) armed = true;
      if ((tally.accepted.size >= target && settled) || tally.accepted.size >= MAX_ACCEPTED) stopClients = true;
    }
  }

  async function worker(i: number) {
    const rand = seededRandom(seed + 100 + i);
    const id = `chaos-w${i}`;
    const pick = () => nodes[Math.floor(rand() * servers)]!;
    const q = "gpu=test&isStream=false";
    while (!stopWorkers) {
      const taken = await call(pick(), "GET", `/v2/echo/job-take/${id}?gpu=test&job_in_progress=0`, key);
      if (taken?.status === 200) {
        const job = (await taken.json()) as { id: string; input: { n: number } };
        if (done.has(job.id)) tally.takenAfterDone.push(job.id);
        if (rand() < 0.3) await call(pick(), "POST", `/v2/echo/job-stream/${id}/${job.id}?${q}`, key, { output: { part: job.input.n } });
        // A worker resends a result whose answer it never got, to any server.
        for (;;) {
          const res = await call(pick(), "POST", `/v2/echo/job-done/${id}/${job.id}?${q}`, key, { output: { doubled: job.input.n * 2 } });
          if (!res) continue;
          if (res.status === 200) done.add(job.id);
          else tally.otherAnswers.push(`POST job-done ${res.status}`);
          break;
        }
      } else if (taken && taken.status !== 204) {
        tally.otherAnswers.push(`GET job-take ${taken.status}`);
      }
      // Idle or between jobs, the worker says it runs nothing: a job whose take answer the kill
      // cut off is then given back to the queue.
      await call(pick(), "GET", `/v2/echo/ping/${id}?runpod_version=1.12.0`, key);
    }
  }

  const workers = Array.from({ length: WORKERS }, (_, i) => worker(i));
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
  await chaos;
  // The case happened: some kill cut off a submission and a result.
  expect({ kills: inFlightAtKills.length, met: met(), cutOff: tally.cutOff }).toMatchObject({ met: true });

  const status = async (id: string) => {
    const node = nodes[0]!;
    await node.up;
    const res = await fetch(`${node.url}/v2/echo/status/${id}`, { headers: { authorization: `Bearer ${key}` } });
    return [res.status, await res.json()] as [number, any];
  };
  const pending = new Set(tally.accepted.keys());
  await until(
    async () => {
      for (const id of pending) if ((await status(id))[1].status === "COMPLETED") pending.delete(id);
      return pending.size === 0;
    },
    `all ${tally.accepted.size} accepted jobs to complete`,
    20_000,
  );
  stopWorkers = true;
  await Promise.all(workers);
  console.log(
    `${kind}: ${tally.accepted.size} jobs accepted, server ${victim} of ${servers} killed ${inFlightAtKills.length} time(s) from ${killAfter} accepted on, with these requests in flight to it: ${JSON.stringify(inFlightAtKills)}; cut off: ${JSON.stringify(tally.cutOff)}`,
  );

  // Every accepted job completed with its own result.
  const results: Record<string, unknown> = {};
  const expected: Record<string, unknown> = {};
  for (const [id, n] of tally.accepted) {
    results[id] = await status(id);
    expected[id] = [
      200,
      {
        id,
        status: "COMPLETED",
        output: { doubled: n * 2 },
        delayTime: expect.any(Number),
        executionTime: expect.any(Number),
        workerId: expect.stringMatching(/^chaos-w/),
      },
    ];
  }
  expect(results).toEqual(expected);
  expect({ takenAfterDone: tally.takenAfterDone, otherAnswers: tally.otherAnswers }).toEqual({ takenAfterDone: [], otherAnswers: [] });

  // A late result for an ended job, from the worker that ran it, is answered (runpod-python would
  // lose it on a 4xx) and changes nothing.
  for (const id of tally.accepted.keys()) {
    const node = nodes[Math.floor(plan() * servers)]!;
    const ranIt = (results[id] as [number, { workerId: string }])[1].workerId;
    const res = await fetch(`${node.url}/v2/echo/job-done/${ranIt}/${id}?gpu=test&isStream=false`, {
      method: "POST",
      headers: { authorization: key },
      body: JSON.stringify({ output: { doubled: -1 } }),
    });
    expect(res.status).toBe(200);
  }
  for (const id of tally.accepted.keys()) results[id] = await status(id);
  expect(results).toEqual(expected);
}

describe("kill -9 with submissions and results in flight", () => {
  test("embedded SQLite store: every job answered 200 completes exactly once", () => chaosRun("sqlite", 1), 40_000);
  test("Redis, two servers, one killed: every job answered 200 completes exactly once", () => chaosRun("redis", 2), 40_000);
});
