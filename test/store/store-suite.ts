import { describe, expect, test } from "bun:test";
import { topics } from "../../runtime/server/store/store-events.ts";
import { until } from "../helpers/until.ts";
import {
  IdempotencyConflictError,
  IdempotencyJobGoneError,
  QueueFullError,
  type EndedJob,
  type NewJob,
  type Store,
  type StoredJob,
} from "../../runtime/server/store/store.ts";

export const RETENTION = { syncMs: 60_000, asyncMs: 1_800_000 };
/** How long the suite's Idempotency-Keys are kept (the server's default, 24 h). */
const IDEMPOTENCY_TTL = 86_400_000;
const T0 = 1_790_000_000_000;
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const newJob = (id: string, over: Partial<NewJob> = {}): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false, ...over });
/** A stored job as a result answers it (EndedJob): all but its input. */
const ended = (job: StoredJob | null): EndedJob | null => {
  if (!job) return null;
  const { input: _input, ...rest } = job;
  return rest;
};

/** One suite for every Store backend: the same behaviour, whatever keeps the state. */
export function runStoreSuite(name: string, open: () => Promise<Store>) {
  const withStore = (fn: (s: Store) => Promise<void>) => async () => {
    const store = await open();
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  };

  describe(`${name} store`, () => {
    test(
      "enqueue and get; an expired job is gone",
      withStore(async (s) => {
        const job = await s.enqueue(newJob("a", { policy: { ...policy, ttl: 10_000 }, keyId: "k1", webhook: "http://x/h" }), T0);
        expect(job).toMatchObject({
          id: "a",
          endpointId: "ep",
          status: "IN_QUEUE",
          input: { id: "a" },
          createdAt: T0,
          queuedAt: T0,
          expiresAt: T0 + 10_000,
          keyId: "k1",
          losses: 0,
          retries: 0,
        });
        expect(await s.get("ep", "a", T0 + 9_999)).toEqual(job);
        expect(await s.get("other", "a", T0)).toBeNull();
        expect(await s.get("ep", "a", T0 + 10_000)).toBeNull();
      }),
    );

    test(
      "a long input comes back whole from take, get and retry, a short one too; a webhook's job carries no input",
      withStore(async (s) => {
        const long = { prompt: "p".repeat(100_000), nested: { list: [1, "two", null], text: 'é😀\n"' } };
        await s.enqueue(newJob("long", { input: long, webhook: "http://x/h" }), T0);
        await s.enqueue(newJob("short"), T0);
        expect((await s.get("ep", "long", T0))?.input).toEqual(long);
        const taken = await s.claim("ep", "w", 2, T0);
        expect(taken.map((j) => j.input)).toEqual([long, { id: "short" }]);
        await s.finish("w", "long", { error: "boom" }, false, T0);
        const delivery = (await s.takeDueDeliveries(T0, 1_000, 10)).find((d) => d.job.id === "long");
        expect(delivery?.job.status).toBe("FAILED");
        expect(delivery && "input" in delivery.job).toBe(false); // an ended job's copy: its input is not stored again
        const retried = await s.retry("ep", "long", T0);
        expect(retried.kind === "retried" && retried.job.input).toEqual(long);
        expect((await s.claim("ep", "w", 1, T0))[0]?.input).toEqual(long);
      }),
    );

    test(
      "a long output comes back whole from finish, get, stream reads, the job list and a webhook's job",
      withStore(async (s) => {
        const long = { image: "b".repeat(100_000), nested: { list: [1, "two", null], text: 'é😀\n"\u0000' } };
        await s.enqueue(newJob("out", { webhook: "http://x/h" }), T0);
        await s.claim("ep", "w", 1, T0);
        expect((await s.finish("w", "out", { output: long }, true, T0 + 1))?.output).toEqual(long);
        expect((await s.get("ep", "out", T0 + 1))?.output).toEqual(long);
        expect((await s.readChunks("ep", "out", 0, T0 + 1))?.chunks).toEqual([long]);
        expect(await s.readStream("ep", "out", T0 + 1)).toMatchObject({ job: { output: long, input: { id: "out" } }, chunks: [long] });
        expect((await s.recent("ep", T0 + 1, 10)).jobs.map((j) => [j.id, j.input, j.output])).toEqual([["out", { id: "out" }, long]]);
        const delivery = (await s.takeDueDeliveries(T0 + 1, 1_000, 10)).find((d) => d.job.id === "out");
        expect([delivery?.job.status, delivery?.job.output, delivery && "input" in delivery.job]).toEqual(["COMPLETED", long, false]);
      }),
    );

    test(
      "a claimed job is the job as stored, with the lifetime set while it waited, changed only by the claim",
      withStore(async (s) => {
        const s3Config = { accessId: "a", accessSecret: "s", bucketName: "b", endpointUrl: "http://s3" };
        const full = newJob("full", {
          input: { prompt: "p", n: [1, { x: null }] },
          webhook: "http://x/h",
          s3Config,
          keyId: "k1",
          origin: "http://10.0.0.5:8080",
          traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
          sync: true,
          policy: { ...policy, lowPriority: true },
        });
        await s.enqueue(full, T0);
        await s.enqueue(newJob("plain"), T0 + 1);
        expect(await s.setExpiry("ep", "full", T0 + 500_000, T0 + 2)).not.toBeNull();
        const [before, plainBefore] = [await s.get("ep", "full", T0 + 3), await s.get("ep", "plain", T0 + 3)];
        const taken = await s.claim("ep", "w1", 2, T0 + 3);
        const asTaken = { status: "IN_PROGRESS" as const, startedAt: T0 + 3, workerId: "w1", deadline: T0 + 3 + policy.executionTimeout };
        expect(taken).toEqual([
          { ...before!, ...asTaken },
          { ...plainBefore!, ...asTaken },
        ]);
        expect(taken[0]!.expiresAt).toBe(T0 + 500_000);
        expect([taken[0]!.origin, taken[1]!.origin]).toEqual(["http://10.0.0.5:8080", undefined]);
        expect([taken[0]!.traceparent, taken[1]!.traceparent]).toEqual([
          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
          undefined,
        ]);
        expect(await s.get("ep", "full", T0 + 3)).toEqual(taken[0]!);
      }),
    );

    test(
      "claim hands out jobs oldest first, up to max, per endpoint, skipping expired ones",
      withStore(async (s) => {
        await s.enqueue(newJob("old", { policy: { ...policy, ttl: 10_000 } }), T0);
        for (const id of ["b", "c", "d"]) await s.enqueue(newJob(id), T0 + 1);
        await s.enqueue(newJob("x", { endpointId: "other" }), T0 + 1);
        const got = await s.claim("ep", "w1", 2, T0 + 20_000);
        expect(got.map((j) => [j.id, j.status, j.workerId, j.startedAt, j.deadline])).toEqual([
          ["b", "IN_PROGRESS", "w1", T0 + 20_000, T0 + 80_000],
          ["c", "IN_PROGRESS", "w1", T0 + 20_000, T0 + 80_000],
        ]);
        expect((await s.claim("ep", "w2", 5, T0 + 20_000)).map((j) => j.id)).toEqual(["d"]);
        expect(await s.claim("ep", "w2", 5, T0 + 20_000)).toEqual([]);
        expect(await s.queueDepth("other", T0 + 20_000)).toBe(1);
      }),
    );

    test(
      "enqueue to a waiting worker writes the job as taken by it when nothing is queued, and queues it otherwise",
      withStore(async (s) => {
        expect(s.handsOff).toBe(true);
        await s.enqueue(newJob("first"), T0);
        const queued = await s.enqueue(newJob("behind"), T0, 10, "w"); // "first" waits: not handed
        expect([queued.status, queued.workerId]).toEqual(["IN_QUEUE", undefined]);
        expect((await s.claim("ep", "w", 5, T0)).map((j) => j.id)).toEqual(["first", "behind"]);
        const handed = await s.enqueue(newJob("handed", { webhook: "http://x/h", keyId: "k" }), T0 + 1, 10, "w");
        expect(handed).toMatchObject({
          id: "handed",
          status: "IN_PROGRESS",
          workerId: "w",
          startedAt: T0 + 1,
          deadline: T0 + 1 + policy.executionTimeout,
          input: { id: "handed" },
        });
        expect(await s.get("ep", "handed", T0 + 1)).toMatchObject({
          status: "IN_PROGRESS",
          workerId: "w",
          startedAt: T0 + 1,
          deadline: T0 + 1 + policy.executionTimeout,
        });
        expect(await s.claim("ep", "w2", 5, T0 + 1)).toEqual([]);
        expect(await s.queuePosition("ep", "handed", T0 + 1)).toBeNull();
        expect((await s.health("ep", T0 + 1, 60_000)).jobs).toMatchObject({ inQueue: 0, inProgress: 3 });
        expect(await s.finish("w", "handed", { output: 1 }, false, T0 + 2)).toMatchObject({ status: "COMPLETED", output: 1 });
        // A queued job that expired (not yet swept) is passed over: the next one is handed.
        await s.enqueue(newJob("stale", { policy: { ...policy, ttl: 1 } }), T0 + 2);
        expect(await s.enqueue(newJob("fresh"), T0 + 3, 10, "w")).toMatchObject({ status: "IN_PROGRESS", workerId: "w" });
        expect(await s.finish("w", "fresh", { output: 1 }, false, T0 + 3)).toMatchObject({ status: "COMPLETED" });
        // Handed and never finished: the deadline sweep times it out like a claimed job.
        await s.enqueue(newJob("late"), T0 + 3, 10, "w");
        await s.touchWorker("w", "ep", "k", T0 + 3 + policy.executionTimeout);
        expect((await s.sweep(T0 + 3 + policy.executionTimeout, 10 * policy.executionTimeout)).timedOut).toContainEqual({
          jobId: "late",
          workerId: "w",
        });
      }),
    );

    test(
      "submissions in one turn of the event loop are answered each on its own, in order: handed, queued, full, a duplicate id",
      withStore(async (s) => {
        await s.enqueue(newJob("a"), T0);
        await s.claim("ep", "w0", 1, T0); // nothing queued now; "a" runs on w0
        const results = await Promise.allSettled([
          s.enqueue(newJob("handed"), T0 + 1, 10, "w1"), // nothing queued: to the waiting worker
          s.enqueue(newJob("b"), T0 + 1),
          s.enqueue(newJob("behind"), T0 + 1, 10, "w2"), // "b" was queued before it: queued too
          s.enqueue(newJob("a"), T0 + 1), // the id is taken
          s.enqueue(newJob("c"), T0 + 1, 1), // 2 queued, more than 1
          s.enqueue(newJob("d", { endpointId: "other" }), T0 + 2, 0, "w3"), // its own endpoint's queue is empty
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "rejected", "rejected", "fulfilled"]);
        const job = (i: number) => (results[i] as PromiseFulfilledResult<Awaited<ReturnType<Store["enqueue"]>>>).value;
        expect(job(0)).toMatchObject({ id: "handed", status: "IN_PROGRESS", workerId: "w1", startedAt: T0 + 1 });
        expect(job(1)).toMatchObject({ id: "b", status: "IN_QUEUE", queuedAt: T0 + 1 });
        expect([job(2).status, job(2).workerId]).toEqual(["IN_QUEUE", undefined]);
        expect((results[3] as PromiseRejectedResult).reason).not.toBeInstanceOf(QueueFullError);
        expect((results[4] as PromiseRejectedResult).reason).toBeInstanceOf(QueueFullError);
        expect(job(5)).toMatchObject({ id: "d", status: "IN_PROGRESS", workerId: "w3", startedAt: T0 + 2 });
        // The duplicate and the refusal changed nothing.
        expect(await s.get("ep", "a", T0 + 2)).toMatchObject({ status: "IN_PROGRESS", workerId: "w0", input: { id: "a" } });
        expect(await s.get("ep", "c", T0 + 2)).toBeNull();
        expect((await s.health("ep", T0 + 2, 60_000)).jobs).toMatchObject({ inQueue: 2, inProgress: 2 });
        expect((await s.claim("ep", "w4", 5, T0 + 2)).map((j) => j.id)).toEqual(["b", "behind"]);
        expect(await s.get("other", "d", T0 + 2)).toMatchObject({ status: "IN_PROGRESS", workerId: "w3" });
      }),
    );

    test(
      "enqueue with maxQueued refuses, changing nothing, once more live jobs than that are queued",
      withStore(async (s) => {
        await s.enqueue(newJob("gone", { policy: { ...policy, ttl: 10 } }), T0);
        for (const id of ["a", "b"]) await s.enqueue(newJob(id), T0);
        await s.enqueue(newJob("x", { endpointId: "other" }), T0);
        // "gone" has expired: two live jobs are queued, so a limit of 2 still admits a third.
        await s.enqueue(newJob("c"), T0 + 10, 2);
        const refused = await s.enqueue(newJob("d"), T0 + 10, 2).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(QueueFullError);
        expect((refused as QueueFullError).depth).toBe(3);
        expect(await s.get("ep", "d", T0 + 10)).toBeNull();
        expect(await s.queueDepth("ep", T0 + 10)).toBe(3);
        expect((await s.enqueue(newJob("y", { endpointId: "other" }), T0 + 10, 2)).status).toBe("IN_QUEUE");
      }),
    );

    test(
      "queue position counts lowPriority jobs ahead and leaves expired ones out",
      withStore(async (s) => {
        await s.enqueue(newJob("gone", { policy: { ...policy, ttl: 10 } }), T0);
        await s.enqueue(newJob("a"), T0);
        await s.enqueue(newJob("low", { policy: { ...policy, lowPriority: true } }), T0);
        await s.enqueue(newJob("x", { endpointId: "other" }), T0);
        await s.enqueue(newJob("c"), T0);
        const at = (id: string, ep = "ep") => s.queuePosition(ep, id, T0 + 20);
        expect([await at("a"), await at("low"), await at("c"), await at("x", "other")]).toEqual([0, 1, 2, 0]);
        expect(await at("gone")).toBeNull();
        expect(await at("c", "other")).toBeNull();
        await s.claim("ep", "w", 1, T0 + 20);
        expect([await at("a"), await at("low"), await at("c")]).toEqual([null, 0, 1]);
      }),
    );

    test(
      "progress, stream chunks read once each, and finish with final chunks only when nothing streamed",
      withStore(async (s) => {
        for (const id of ["s", "p"]) await s.enqueue(newJob(id), T0);
        await s.claim("ep", "w", 2, T0);
        expect(await s.progress("w", "s", { pct: 5 }, T0)).toBe(true);
        expect(await s.progress("intruder", "s", { pct: 9 }, T0)).toBe(false);
        expect((await s.get("ep", "s", T0))!.progress).toEqual({ pct: 5 });
        expect(await s.appendChunks("w", "s", ["a", { b: 1 }], T0)).toBe(true);
        expect((await s.readStream("ep", "s", T0))!.chunks).toEqual(["a", { b: 1 }]);
        await s.appendChunks("w", "s", [null], T0);
        expect((await s.readStream("ep", "s", T0))!.chunks).toEqual([null]);
        expect((await s.readStream("ep", "s", T0))!.chunks).toEqual([]);
        const done = await s.finish("w", "s", { output: ["a", { b: 1 }, null] }, true, T0 + 5);
        expect(done).toMatchObject({
          status: "COMPLETED",
          output: ["a", { b: 1 }, null],
          completedAt: T0 + 5,
          expiresAt: T0 + 5 + RETENTION.asyncMs,
        });
        expect((await s.readStream("ep", "s", T0 + 5))!.chunks).toEqual([]);
        await s.finish("w", "p", { output: { whole: 1 } }, true, T0 + 5);
        expect((await s.readStream("ep", "p", T0 + 5))!).toMatchObject({ job: { status: "COMPLETED" }, chunks: [{ whole: 1 }] });
      }),
    );

    test(
      "an output over 1 MB is its stream in pieces of at most 1 MB; an error or streamOutput false is none",
      withStore(async (s) => {
        for (const id of ["big", "err", "quiet"]) await s.enqueue(newJob(id), T0);
        await s.claim("ep", "w", 3, T0);
        const big = { text: "é".repeat(700_000) }; // 1.4 MB of JSON
        expect((await s.finish("w", "big", { output: big }, true, T0))?.output).toEqual(big);
        const pieces = (await s.readChunks("ep", "big", 0, T0))!.chunks as string[];
        expect(pieces.length).toBe(2);
        expect(JSON.parse(pieces.join(""))).toEqual(big);
        expect(pieces.every((p) => Buffer.byteLength(JSON.stringify(p)) <= 1_000_000)).toBe(true);
        expect((await s.readChunks("ep", "big", 1, T0))!.chunks).toEqual([pieces[1]]);
        expect((await s.readStream("ep", "big", T0))!.chunks).toEqual(pieces);
        expect((await s.readStream("ep", "big", T0))!.chunks).toEqual([]);
        await s.finish("w", "err", { error: "boom" }, true, T0);
        await s.finish("w", "quiet", { output: 1 }, false, T0);
        expect([(await s.readChunks("ep", "err", 0, T0))!.chunks, (await s.readChunks("ep", "quiet", 0, T0))!.chunks]).toEqual([[], []]);
      }),
    );

    test(
      "finish is idempotent and ignores other workers; an error fails the job; cost is charged once",
      withStore(async (s) => {
        await s.enqueue(newJob("f", { keyId: "k1", sync: true }), T0);
        await s.enqueue(newJob("g", { keyId: "k1" }), T0);
        await s.claim("ep", "w", 2, T0);
        expect(await s.finish("other", "f", { output: 1 }, false, T0, 0.5)).toBeNull();
        expect(await s.finish("w", "f", { output: 1 }, false, T0, 0.5)).toMatchObject({
          status: "COMPLETED",
          output: 1,
          expiresAt: T0 + RETENTION.syncMs,
        });
        expect(await s.finish("w", "f", { output: 2 }, false, T0, 0.5)).toBeNull();
        expect(await s.finish("w", "g", { error: "boom" }, false, T0, 0.25)).toMatchObject({ status: "FAILED", error: "boom" });
        expect(await s.usage()).toEqual([{ keyId: "k1", endpointId: "ep", jobs: 1, cost: 0.5 }]);
      }),
    );

    test(
      "a result is the job as stored once ended but its input, and none is taken for a job that ended otherwise or went to another worker",
      withStore(async (s) => {
        for (const id of ["done", "cancelled", "expired", "lost", "handed"])
          await s.enqueue(newJob(id, { webhook: "http://x/h", keyId: "k1" }), T0);
        await s.claim("ep", "w1", 4, T0);
        const done = await s.finish("w1", "done", { output: { ok: [1, 2] } }, false, T0 + 5);
        expect(done).toEqual(ended(await s.get("ep", "done", T0 + 5)));
        expect(done && "input" in done).toBe(false);
        expect(done).toMatchObject({
          status: "COMPLETED",
          output: { ok: [1, 2] },
          completedAt: T0 + 5,
          expiresAt: T0 + 5 + RETENTION.asyncMs,
          keyId: "k1",
          workerId: "w1",
        });
        expect((await s.takeDueDeliveries(T0 + 5, 1_000, 10)).map((d) => d.job)).toEqual([done!]);
        await s.cancel("ep", "cancelled", T0 + 6);
        expect(await s.finish("w1", "cancelled", { output: 1 }, false, T0 + 7)).toBeNull();
        expect((await s.get("ep", "cancelled", T0 + 7))?.status).toBe("CANCELLED");
        await s.setExpiry("ep", "expired", T0 + 8, T0 + 7);
        expect(await s.finish("w1", "expired", { output: 1 }, false, T0 + 8)).toBeNull();
        // Lost (put back) and taken by another worker: the first worker's late result changes nothing.
        await s.returnJobs("w1", ["lost"], T0 + 9);
        expect((await s.claim("ep", "w2", 2, T0 + 9)).map((j) => j.id)).toEqual(["lost", "handed"]);
        expect(await s.finish("w1", "lost", { output: "late" }, false, T0 + 10)).toBeNull();
        expect(await s.finish("w2", "lost", { error: "boom" }, false, T0 + 10)).toMatchObject({
          status: "FAILED",
          error: "boom",
          workerId: "w2",
        });
        // Handed straight to a waiting worker, then streamed to before its result: the stream stays its own.
        await s.enqueue(newJob("direct", { sync: true }), T0 + 11, undefined, "w3");
        expect(await s.appendChunks("w3", "direct", ["a"], T0 + 12)).toBe(true);
        expect(await s.finish("w3", "direct", { output: "whole" }, true, T0 + 13)).toMatchObject({
          status: "COMPLETED",
          expiresAt: T0 + 13 + RETENTION.syncMs,
        });
        expect((await s.readChunks("ep", "direct", 0, T0 + 13))!.chunks).toEqual(["a"]);
      }),
    );

    test(
      "a job held again by the same worker ends as it is now: after a lost worker's re-queue, and after a timeout and a retry",
      withStore(async (s) => {
        const long = { text: "x".repeat(3_000) }; // kept apart from its row on the embedded store
        for (const input of [long, { short: 1 }]) {
          const id = `lost-${JSON.stringify(input).length}`;
          await s.touchWorker("w", "ep", "k", T0);
          await s.enqueue(newJob(id, { input, webhook: "http://x/h" }), T0, undefined, "w");
          await s.touchWorker("w", "ep", "k", T0 + 10, { runningIds: [], missingAfterMs: 0 }); // lost: back in the queue, one loss
          expect((await s.claim("ep", "w", 1, T0 + 20)).map((j) => j.id)).toEqual([id]);
          const result = await s.finish("w", id, { output: 1 }, false, T0 + 30);
          expect(result).toMatchObject({ losses: 1, startedAt: T0 + 20 });
          expect(result).toEqual(ended(await s.get("ep", id, T0 + 30)));
          const owed = (await s.takeDueDeliveries(T0 + 30, 1_000, 10)).filter((d) => d.job.id === id);
          expect(owed.map((d) => d.job)).toEqual([JSON.parse(JSON.stringify(result))]); // as the webhook will send it
        }
        await s.enqueue(newJob("again", { policy: { ...policy, executionTimeout: 100 } }), T0 + 40, undefined, "w");
        await s.touchWorker("w", "ep", "k", T0 + 150);
        expect((await s.sweep(T0 + 150, 60_000)).timedOut.map((t) => t.jobId)).toEqual(["again"]);
        expect((await s.retry("ep", "again", T0 + 200)).kind).toBe("retried");
        await s.claim("ep", "w", 1, T0 + 300);
        const again = await s.finish("w", "again", { output: 1 }, false, T0 + 350);
        expect(again).toMatchObject({ retries: 1, queuedAt: T0 + 200, startedAt: T0 + 300 });
        expect(again).toEqual(ended(await s.get("ep", "again", T0 + 350)));
      }),
    );

    test(
      "submissions in one turn count the queue at their own clocks: a job expired by a later one's clock is not counted",
      withStore(async (s) => {
        const short = { ...policy, ttl: 10_000 };
        await s.enqueue(newJob("old", { policy: short }), T0);
        await s.enqueue(newJob("h-old", { endpointId: "h", policy: short }), T0);
        const answers = await Promise.allSettled([
          s.enqueue(newJob("a"), T0 + 5_000, 0), // "old" is live then: more than 0 queued
          s.enqueue(newJob("b"), T0 + 20_000, 0), // "old" has expired by then
          s.enqueue(newJob("h1", { endpointId: "h" }), T0 + 5_000, 0), // "h-old" is live: full
          s.enqueue(newJob("h2", { endpointId: "h" }), T0 + 20_000, 10, "w"), // nothing live queued: handed
        ]);
        expect(answers.map((r) => r.status)).toEqual(["rejected", "fulfilled", "rejected", "fulfilled"]);
        expect((answers[0] as PromiseRejectedResult).reason).toBeInstanceOf(QueueFullError);
        expect((answers[1] as PromiseFulfilledResult<unknown>).value).toMatchObject({ id: "b", status: "IN_QUEUE" });
        expect((answers[3] as PromiseFulfilledResult<unknown>).value).toMatchObject({ id: "h2", status: "IN_PROGRESS", workerId: "w" });
      }),
    );

    test(
      "takes in one turn of the event loop are answered each on its own, in order, each at its own time",
      withStore(async (s) => {
        await s.enqueue(newJob("a"), T0);
        await s.enqueue(newJob("short", { policy: { ...policy, ttl: 10_000 } }), T0);
        for (const id of ["b", "c", "d"]) await s.enqueue(newJob(id), T0);
        const [w1, w2, none, w3, w4] = await Promise.all([
          s.claim("ep", "w1", 1, T0 + 1),
          s.claim("ep", "w2", 2, T0 + 20_000), // "short" has expired by its clock: passed over
          s.claim("other", "w5", 3, T0 + 20_001),
          s.claim("ep", "w3", 1, T0 + 20_002),
          s.claim("ep", "w4", 5, T0 + 20_003), // nothing left
        ]);
        expect([w1, w2, none, w3, w4].map((jobs) => jobs.map((j) => [j.id, j.workerId, j.startedAt]))).toEqual([
          [["a", "w1", T0 + 1]],
          [
            ["b", "w2", T0 + 20_000],
            ["c", "w2", T0 + 20_000],
          ],
          [],
          [["d", "w3", T0 + 20_002]],
          [],
        ]);
        expect((await s.health("ep", T0 + 20_004, 60_000)).jobs).toMatchObject({ inQueue: 0, inProgress: 4 });
      }),
    );

    test(
      "results in one turn of the event loop are answered each on its own, in order, each at its own time",
      withStore(async (s) => {
        for (const id of ["f", "g", "h"]) await s.enqueue(newJob(id, { keyId: "k1" }), T0);
        await s.claim("ep", "w", 2, T0);
        await s.claim("ep", "v", 1, T0);
        const answers = await Promise.all([
          s.finish("w", "f", { output: 1 }, false, T0 + 10, 0.5),
          s.finish("other", "g", { output: 2 }, false, T0 + 11), // not its job
          s.finish("w", "g", { error: "boom" }, false, T0 + 12),
          s.finish("w", "f", { output: 3 }, false, T0 + 13, 0.5), // a repeat
          s.finish("v", "h", { output: [1, 2] }, true, T0 + 14, 0.25),
        ]);
        expect(answers.map((j) => j && [j.id, j.status, j.completedAt])).toEqual([
          ["f", "COMPLETED", T0 + 10],
          null,
          ["g", "FAILED", T0 + 12],
          null,
          ["h", "COMPLETED", T0 + 14],
        ]);
        expect(await s.get("ep", "f", T0 + 20)).toMatchObject({ output: 1, expiresAt: T0 + 10 + RETENTION.asyncMs });
        expect(await s.readChunks("ep", "h", 0, T0 + 20)).toMatchObject({ chunks: [[1, 2]] });
        expect(await s.usage()).toEqual([{ keyId: "k1", endpointId: "ep", jobs: 2, cost: 0.75 }]);
        expect((await s.health("ep", T0 + 20, 60_000)).jobs).toMatchObject({ inQueue: 0, inProgress: 0, completed: 2, failed: 1 });
      }),
    );

    test(
      "cancel: a queued job is not taken, a running one's worker is told, a finished one is unchanged",
      withStore(async (s) => {
        for (const id of ["q", "r", "f"]) await s.enqueue(newJob(id), T0);
        const [r, f] = await s.claim("ep", "w", 2, T0);
        expect([r!.id, f!.id]).toEqual(["q", "r"]);
        await s.enqueue(newJob("later"), T0);
        await s.finish("w", "r", { output: 1 }, false, T0);
        expect(await s.cancel("ep", "q", T0)).toMatchObject({ job: { status: "CANCELLED" }, cancelled: true });
        expect(await s.takeStops("w")).toEqual(["q"]);
        expect(await s.takeStops("w")).toEqual([]);
        expect(await s.cancel("ep", "r", T0)).toMatchObject({ job: { status: "COMPLETED", output: 1 }, cancelled: false });
        expect(await s.cancel("ep", "f", T0)).toMatchObject({ job: { status: "CANCELLED" }, cancelled: true });
        // Cancelled already, in the same millisecond: this call cancelled nothing.
        expect(await s.cancel("ep", "f", T0)).toMatchObject({ job: { status: "CANCELLED" }, cancelled: false });
        expect((await s.claim("ep", "w", 5, T0)).map((j) => j.id)).toEqual(["later"]);
        expect(await s.cancel("ep", "nope", T0)).toBeNull();
      }),
    );

    test(
      "retry: only FAILED or TIMED_OUT, same id and input, output and chunks removed, counted",
      withStore(async (s) => {
        await s.enqueue(newJob("r"), T0);
        expect(await s.retry("ep", "r", T0)).toEqual({ kind: "conflict", status: "IN_QUEUE" });
        expect(await s.retry("ep", "nope", T0)).toEqual({ kind: "not-found" });
        await s.claim("ep", "w", 1, T0);
        await s.appendChunks("w", "r", ["x"], T0);
        await s.finish("w", "r", { error: "e" }, false, T0);
        const out = await s.retry("ep", "r", T0 + 10);
        expect(out.kind).toBe("retried");
        if (out.kind !== "retried") return;
        expect(out.job).toMatchObject({
          id: "r",
          status: "IN_QUEUE",
          input: { id: "r" },
          retries: 1,
          queuedAt: T0 + 10,
          expiresAt: T0 + 10 + policy.ttl,
        });
        expect(out.job.error).toBeUndefined();
        expect((await s.readStream("ep", "r", T0 + 10))!.chunks).toEqual([]);
        expect((await s.health("ep", T0 + 10, 60_000)).jobs).toEqual({ completed: 0, failed: 0, inProgress: 0, inQueue: 1, retried: 1 });
      }),
    );

    test(
      "a heartbeat that no longer lists a job held past the grace period loses it",
      withStore(async (s) => {
        await s.enqueue(newJob("kept"), T0);
        await s.enqueue(newJob("dropped"), T0);
        await s.touchWorker("w", "ep", "k", T0);
        await s.claim("ep", "w", 2, T0);
        await s.touchWorker("w", "ep", "k", T0 + 29_999, { runningIds: ["kept"], missingAfterMs: 30_000 });
        expect((await s.get("ep", "dropped", T0 + 29_999))!.status).toBe("IN_PROGRESS");
        expect(await s.touchWorker("w", "ep", "k", T0 + 30_000, { runningIds: ["kept"], missingAfterMs: 30_000 })).toEqual({
          requeued: ["dropped"],
          lost: [],
        });
        expect((await s.get("ep", "kept", T0 + 30_000))!.status).toBe("IN_PROGRESS");
        expect((await s.get("ep", "dropped", T0 + 30_000))!).toMatchObject({ status: "IN_QUEUE", losses: 1 });
        await s.claim("ep", "w", 1, T0 + 30_000);
        expect(await s.touchWorker("w", "ep", "k", T0 + 60_000, { runningIds: ["kept"], missingAfterMs: 30_000 })).toEqual({
          requeued: [],
          lost: ["dropped"],
        });
        expect((await s.get("ep", "dropped", T0 + 60_000))!.error).toContain("heartbeat no longer listed the job");
        // A heartbeat without a job list (a plain touch) settles nothing.
        await s.enqueue(newJob("quiet"), T0 + 60_000);
        await s.claim("ep", "w", 1, T0 + 60_000);
        expect(await s.touchWorker("w", "ep", "k", T0 + 200_000)).toEqual({ requeued: [], lost: [] });
        expect((await s.get("ep", "quiet", T0 + 200_000))!.status).toBe("IN_PROGRESS");
      }),
    );

    test(
      "a worker id is its first endpoint's and key's: another's touch is refused and changes nothing, until the id is dropped for silence",
      withStore(async (s) => {
        expect(await s.touchWorker("w", "ep", "k", T0)).toEqual({ requeued: [], lost: [] });
        await s.enqueue(newJob("j"), T0);
        await s.claim("ep", "w", 1, T0);
        const lossy = { runningIds: [], missingAfterMs: 0, unhealthy: { check: "gpu", reason: "x" } };
        expect(await s.touchWorker("w", "other", "k", T0 + 10, lossy)).toBeNull();
        expect(await s.touchWorker("w", "ep", "k2", T0 + 10, lossy)).toBeNull();
        expect(await s.get("ep", "j", T0 + 10)).toMatchObject({ status: "IN_PROGRESS", workerId: "w", losses: 0 });
        expect((await s.health("ep", T0 + 10, 60_000)).workers).toMatchObject({ running: 1, unhealthy: 0 });
        expect((await s.health("other", T0 + 10, 60_000)).workers).toMatchObject({ idle: 0, running: 0, unhealthy: 0 });
        expect(await s.touchWorker("w", "ep", "k", T0 + 20)).toEqual({ requeued: [], lost: [] });
        // A worker whose process ended keeps its owner until the sweep has lost its jobs.
        await s.forgetWorker("w");
        expect(await s.touchWorker("w", "other", "k2", T0 + 30)).toBeNull();
        await s.sweep(T0 + 30, 60_000);
        expect(await s.get("ep", "j", T0 + 30)).toMatchObject({ status: "IN_QUEUE", losses: 1 });
        expect(await s.touchWorker("w", "other", "k2", T0 + 40)).toEqual({ requeued: [], lost: [] });
        expect(await s.touchWorker("w", "ep", "k", T0 + 50)).toBeNull();
        // A request that names a job records no worker it does not know.
        expect(await s.touchWorker("new", "ep", "k", T0 + 60, { knownOnly: true })).toBeNull();
        expect((await s.health("ep", T0 + 60, 60_000)).workers).toMatchObject({ idle: 0, running: 0 });
        expect(await s.touchWorker("new", "ep", "k", T0 + 70)).toEqual({ requeued: [], lost: [] });
        expect(await s.touchWorker("new", "ep", "k", T0 + 80, { knownOnly: true })).toEqual({ requeued: [], lost: [] });
      }),
    );

    test(
      "a stop owed to a timed-out run does not cancel its retry",
      withStore(async (s) => {
        await s.enqueue(newJob("t", { policy: { ...policy, executionTimeout: 6_000 } }), T0);
        await s.claim("ep", "w", 1, T0);
        await s.touchWorker("w", "ep", "k", T0);
        await s.sweep(T0 + 6_000, 60_000); // TIMED_OUT; a stop is owed to w
        await s.retry("ep", "t", T0 + 6_001);
        expect((await s.claim("ep", "w", 1, T0 + 6_002)).map((j) => j.id)).toEqual(["t"]);
        expect(await s.takeStops("w")).toEqual([]);
      }),
    );

    test(
      "readChunks reads from an index without marking anything returned",
      withStore(async (s) => {
        await s.enqueue(newJob("c"), T0);
        expect(await s.readChunks("ep", "c", 0, T0)).toMatchObject({ job: { id: "c", status: "IN_QUEUE" }, chunks: [] });
        await s.claim("ep", "w", 1, T0);
        await s.appendChunks("w", "c", ["a", { b: 1 }, null], T0);
        expect((await s.readChunks("ep", "c", 0, T0))!.chunks).toEqual(["a", { b: 1 }, null]);
        expect((await s.readChunks("ep", "c", 2, T0))!.chunks).toEqual([null]);
        expect((await s.readChunks("ep", "c", 3, T0))!.chunks).toEqual([]);
        // A /stream reader still gets every chunk: readChunks marked none of them.
        expect((await s.readStream("ep", "c", T0))!.chunks).toEqual(["a", { b: 1 }, null]);
        expect((await s.readChunks("ep", "c", 1, T0))!.chunks).toEqual([{ b: 1 }, null]);
        expect(await s.readChunks("other", "c", 0, T0)).toBeNull();
        expect(await s.readChunks("ep", "nope", 0, T0)).toBeNull();
      }),
    );

    test(
      "recent filters by status, paging within the filter",
      withStore(async (s) => {
        for (const id of ["1", "2", "3", "4", "5"]) await s.enqueue(newJob(id), T0);
        await s.claim("ep", "w", 2, T0); // 1 and 2 run
        await s.finish("w", "1", { output: 1 }, false, T0);
        const queued = await s.recent("ep", T0, 2, undefined, "IN_QUEUE");
        expect(queued.jobs.map((j) => j.id)).toEqual(["5", "4"]);
        expect((await s.recent("ep", T0, 2, queued.next, "IN_QUEUE")).jobs.map((j) => j.id)).toEqual(["3"]);
        expect((await s.recent("ep", T0, 5, undefined, "COMPLETED")).jobs.map((j) => j.id)).toEqual(["1"]);
        expect((await s.recent("ep", T0, 5, undefined, "FAILED")).jobs).toEqual([]);
        expect((await s.recent("ep", T0, 5, undefined, "IN_PROGRESS")).jobs.map((j) => j.id)).toEqual(["2"]);
      }),
    );

    test(
      "recent by status pages each status newest first; a job leaves its status's list when it changes or expires",
      withStore(async (s) => {
        const ids = ["1", "2", "3", "4", "5", "6"];
        for (const id of ids) await s.enqueue(newJob(id), T0);
        await s.enqueue(newJob("x", { endpointId: "other" }), T0);
        await s.claim("other", "w", 1, T0);
        await s.claim("ep", "w", 6, T0);
        const list = async (status?: "IN_PROGRESS" | "COMPLETED" | "FAILED" | "IN_QUEUE", at = T0) => {
          const pages: string[][] = [];
          let next: string | undefined;
          do {
            const page = await s.recent("ep", at, 2, next, status);
            pages.push(page.jobs.map((j) => j.id));
            next = page.next;
          } while (next);
          return pages;
        };
        expect(await list("IN_PROGRESS")).toEqual([
          ["6", "5"],
          ["4", "3"],
          ["2", "1"],
        ]);
        for (const id of ["1", "3", "4", "6"]) await s.finish("w", id, { output: id }, false, T0 + 1);
        await s.finish("w", "2", { error: "boom" }, false, T0 + 1);
        expect(await list("COMPLETED")).toEqual([
          ["6", "4"],
          ["3", "1"],
        ]);
        expect(await list("IN_PROGRESS")).toEqual([["5"]]);
        expect(await list("FAILED")).toEqual([["2"]]);
        expect((await s.retry("ep", "2", T0 + 2)).kind).toBe("retried");
        expect(await list("FAILED")).toEqual([[]]);
        expect(await list("IN_QUEUE")).toEqual([["2"]]);
        expect(await list()).toEqual([
          ["6", "5"],
          ["4", "3"],
          ["2", "1"],
        ]);
        // Past their retention the ended ones are gone from every list, before any sweep.
        const later = T0 + 1 + RETENTION.asyncMs;
        expect([await list("COMPLETED", later), await list(undefined, later)]).toEqual([[[]], [["5", "2"]]]);
        await s.sweep(later, 10 * RETENTION.asyncMs);
        expect(await list("COMPLETED", later)).toEqual([[]]);
      }),
    );

    test(
      "recent without a status pages every job newest first by submission, a retried one in its place though it queued last",
      withStore(async (s) => {
        const ids = Array.from({ length: 12 }, (_, i) => `${i + 10}`);
        for (const id of ids) await s.enqueue(newJob(id), T0);
        await s.claim("ep", "w", 3, T0); // 10, 11, 12 run
        await s.finish("w", "10", { output: 1 }, false, T0);
        await s.finish("w", "11", { error: "boom" }, false, T0);
        expect((await s.retry("ep", "11", T0)).kind).toBe("retried"); // queued again, at the back
        await s.returnJobs("w", ["12"], T0); // queued again, in its place
        await s.cancel("ep", "15", T0);
        const pages = async (size: number) => {
          const out: string[][] = [];
          let next: string | undefined;
          do {
            const page = await s.recent("ep", T0, size, next);
            out.push(page.jobs.map((j) => j.id));
            next = page.next;
          } while (next);
          return out;
        };
        const newestFirst = [...ids].reverse();
        for (const size of [1, 2, 5, 12, 20]) expect((await pages(size)).flat()).toEqual(newestFirst);
        expect((await s.recent("ep", T0, 3)).jobs.map((j) => [j.id, j.status])).toEqual([
          ["21", "IN_QUEUE"],
          ["20", "IN_QUEUE"],
          ["19", "IN_QUEUE"],
        ]);
      }),
    );

    test(
      "purge removes queued jobs only; health counts exactly; recent pages newest first",
      withStore(async (s) => {
        for (const id of ["1", "2", "3", "4"]) await s.enqueue(newJob(id), T0);
        await s.claim("ep", "w", 1, T0);
        await s.touchWorker("idle", "ep", "k", T0);
        await s.touchWorker("sick", "ep", "k", T0, { unhealthy: { check: "gpu", reason: "ECC" } });
        await s.touchWorker("w", "ep", "k", T0);
        expect(await s.health("ep", T0, 60_000)).toEqual({
          jobs: { completed: 0, failed: 0, inProgress: 1, inQueue: 3, retried: 0 },
          workers: { idle: 1, running: 1, initializing: 0, unhealthy: 1 },
        });
        const page1 = await s.recent("ep", T0, 3);
        expect(page1.jobs.map((j) => j.id)).toEqual(["4", "3", "2"]);
        expect((await s.recent("ep", T0, 3, page1.next)).jobs.map((j) => j.id)).toEqual(["1"]);
        expect(await s.purgeQueue("ep", T0)).toBe(3);
        expect(await s.get("ep", "2", T0)).toBeNull();
        expect((await s.health("ep", T0, 60_000)).jobs.inQueue).toBe(0);
        expect((await s.health("ep", T0 + 60_000, 60_000)).workers).toEqual({ idle: 0, running: 0, initializing: 0, unhealthy: 0 });
      }),
    );

    test(
      "Idempotency-Key: while kept, it answers its job as it is now; another body is refused; another API key or endpoint has its own",
      withStore(async (s) => {
        const tag = { key: "order-1", bodyHash: "h1", ttlMs: IDEMPOTENCY_TTL };
        const first = await s.enqueue(newJob("i1", { keyId: "k1", idempotency: tag }), T0);
        expect(first.replayed).toBeUndefined();
        expect(await s.findByIdempotencyKey("k1", "ep", "order-1", T0)).toEqual({
          jobId: "i1",
          bodyHash: "h1",
          expiresAt: T0 + IDEMPOTENCY_TTL,
          job: await s.get("ep", "i1", T0),
        });
        // A retry after the job was taken and finished answers it as it is now, writing nothing.
        await s.claim("ep", "w", 1, T0);
        await s.finish("w", "i1", { output: { ok: 1 } }, false, T0 + 1);
        // A queue limit below any depth (-1) admits no new job but still answers a replay.
        const again = await s.enqueue(newJob("i2", { keyId: "k1", idempotency: tag }), T0 + 2, -1);
        expect([again.id, again.status, again.output, again.replayed]).toEqual(["i1", "COMPLETED", { ok: 1 }, true]);
        expect(await s.get("ep", "i2", T0 + 2)).toBeNull();
        await expect(
          s.enqueue(newJob("n1", { keyId: "k1", idempotency: { ...tag, key: "order-new" } }), T0 + 2, -1),
        ).rejects.toBeInstanceOf(QueueFullError);
        expect(await s.get("ep", "n1", T0 + 2)).toBeNull();
        await expect(s.enqueue(newJob("i3", { keyId: "k1", idempotency: { ...tag, bodyHash: "h2" } }), T0 + 2)).rejects.toBeInstanceOf(
          IdempotencyConflictError,
        );
        expect(await s.get("ep", "i3", T0 + 2)).toBeNull();
        expect((await s.enqueue(newJob("i4", { keyId: "k2", idempotency: tag }), T0 + 2)).id).toBe("i4");
        expect((await s.enqueue(newJob("i5", { endpointId: "ep2", keyId: "k1", idempotency: tag }), T0 + 2)).id).toBe("i5");
        expect(await s.findByIdempotencyKey("k1", "ep", "order-unused", T0 + 2)).toBeNull();
      }),
    );

    test(
      "Idempotency-Key: kept past its job's retention and purge, a retry is refused naming the job, never run again; past its ttl it is free",
      withStore(async (s) => {
        const tag = { key: "order-1", bodyHash: "h1", ttlMs: IDEMPOTENCY_TTL };
        await s.enqueue(newJob("i1", { keyId: "k1", idempotency: tag, sync: true }), T0);
        await s.claim("ep", "w", 1, T0);
        await s.finish("w", "i1", { output: { ok: 1 } }, false, T0 + 1);
        // The runsync job's result is kept 60 s: a retry 65 s later, before and after the sweep.
        const later = T0 + 1 + RETENTION.syncMs + 5_000;
        for (const swept of [false, true]) {
          if (swept) await s.sweep(later, 60_000);
          const refused = await s.enqueue(newJob("i2", { keyId: "k1", idempotency: tag }), later).catch((e: unknown) => e);
          expect([swept, refused]).toEqual([swept, new IdempotencyJobGoneError("order-1", "i1")]);
          expect((refused as IdempotencyJobGoneError).jobId).toBe("i1");
          expect(await s.get("ep", "i2", later)).toBeNull();
          expect(await s.findByIdempotencyKey("k1", "ep", "order-1", later)).toEqual({
            jobId: "i1",
            bodyHash: "h1",
            expiresAt: T0 + IDEMPOTENCY_TTL,
            job: null,
          });
        }
        // Another body is still the conflict, not the job's end.
        await expect(s.enqueue(newJob("i3", { keyId: "k1", idempotency: { ...tag, bodyHash: "h2" } }), later)).rejects.toBeInstanceOf(
          IdempotencyConflictError,
        );
        // A purged job's key is kept too.
        const purgedTag = { ...tag, key: "order-2" };
        await s.enqueue(newJob("p1", { keyId: "k1", idempotency: purgedTag }), later);
        expect(await s.purgeQueue("ep", later)).toBe(1);
        await expect(s.enqueue(newJob("p2", { keyId: "k1", idempotency: purgedTag }), later)).rejects.toBeInstanceOf(
          IdempotencyJobGoneError,
        );
        // Past its ttl the key is free again, swept or not: a new job, whose key is kept from now.
        const free = T0 + IDEMPOTENCY_TTL;
        expect(await s.findByIdempotencyKey("k1", "ep", "order-1", free)).toBeNull();
        expect((await s.enqueue(newJob("i4", { keyId: "k1", idempotency: tag }), free)).id).toBe("i4");
        await s.sweep(free + 1, 60_000);
        expect((await s.enqueue(newJob("i5", { keyId: "k1", idempotency: tag }), free + 1)).id).toBe("i4");
        expect((await s.findByIdempotencyKey("k1", "ep", "order-1", free + 1))?.expiresAt).toBe(free + IDEMPOTENCY_TTL);
        expect((await s.health("ep", free + 1, 60_000)).jobs.inQueue).toBe(1);
      }),
    );

    test(
      "Idempotency-Key: submissions with one key sent together make one job",
      withStore(async (s) => {
        const tag = { key: "together", bodyHash: "h1", ttlMs: IDEMPOTENCY_TTL };
        const sent = await Promise.all(
          ["c1", "c2", "c3", "c4"].map((id) => s.enqueue(newJob(id, { keyId: "k1", idempotency: tag }), T0, 100)),
        );
        expect(sent.map((j) => [j.id, j.replayed ?? false])).toEqual([
          ["c1", false],
          ["c1", true],
          ["c1", true],
          ["c1", true],
        ]);
        expect((await s.health("ep", T0, 60_000)).jobs.inQueue).toBe(1);
      }),
    );

    test(
      "failQueued ends the live queued jobs FAILED with the error, running ones untouched",
      withStore(async (s) => {
        for (const id of ["q1", "q2", "run"]) await s.enqueue(newJob(id, id === "q2" ? { webhook: "http://x/h" } : {}), T0);
        await s.claim("ep", "w", 1, T0); // q1
        const failed = await s.failQueued("ep", "no worker", T0 + 5, 10);
        expect(failed.map((j) => [j.id, j.status, j.error, j.completedAt, j.expiresAt])).toEqual([
          ["q2", "FAILED", "no worker", T0 + 5, T0 + 5 + RETENTION.asyncMs],
          ["run", "FAILED", "no worker", T0 + 5, T0 + 5 + RETENTION.asyncMs],
        ]);
        expect((await s.get("ep", "q2", T0 + 5))?.status).toBe("FAILED");
        expect((await s.get("ep", "q1", T0 + 5))?.status).toBe("IN_PROGRESS");
        expect((await s.health("ep", T0 + 5, 60_000)).jobs).toEqual({ completed: 0, failed: 2, inProgress: 1, inQueue: 0, retried: 0 });
        expect((await s.takeDueDeliveries(T0 + 5, 1_000, 10)).map((d) => [d.job.id, d.job.status])).toEqual([["q2", "FAILED"]]);
        expect(await s.claim("ep", "w", 5, T0 + 5)).toEqual([]);
        expect(await s.failQueued("ep", "again", T0 + 6, 10)).toEqual([]);
      }),
    );

    test(
      "failQueued ends at most `limit` jobs a call, in queue order, passing expired ones",
      withStore(async (s) => {
        await s.enqueue(newJob("old", { policy: { executionTimeout: 600_000, lowPriority: false, ttl: 10_000 } }), T0);
        for (const id of ["a", "b", "c"]) await s.enqueue(newJob(id), T0 + 1);
        const at = T0 + 10_001; // "old" has expired, not swept yet
        expect((await s.failQueued("ep", "x", at, 2)).map((j) => j.id)).toEqual(["a", "b"]);
        expect((await s.failQueued("ep", "x", at, 2)).map((j) => j.id)).toEqual(["c"]);
        expect(await s.failQueued("ep", "x", at, 2)).toEqual([]);
        expect((await s.health("ep", at, 60_000)).jobs.failed).toBe(3);
      }),
    );

    test(
      "sweep: expiry, execution timeout (worker told), worker loss re-queues once then fails",
      withStore(async (s) => {
        await s.enqueue(newJob("gone", { policy: { ...policy, ttl: 10_000 } }), T0);
        await s.enqueue(newJob("slow", { policy: { ...policy, executionTimeout: 6_000 } }), T0 + 1);
        await s.enqueue(newJob("lost"), T0 + 2);
        await s.claim("ep", "busy", 1, T0 + 20_000); // "gone" expired: "slow" is taken
        await s.claim("ep", "dies", 1, T0 + 20_000);
        await s.touchWorker("busy", "ep", "k", T0 + 20_000);
        await s.touchWorker("dies", "ep", "k", T0 + 20_000);
        let r = await s.sweep(T0 + 26_000, 30_000);
        expect(r).toEqual({ expired: 1, timedOut: [{ jobId: "slow", workerId: "busy" }], requeued: [], lost: [] });
        expect((await s.get("ep", "slow", T0 + 26_000))!).toMatchObject({
          status: "TIMED_OUT",
          error: "execution timeout of 6000 ms exceeded",
        });
        expect(await s.takeStops("busy")).toEqual(["slow"]);
        r = await s.sweep(T0 + 50_000, 30_000);
        expect(r.requeued).toEqual(["lost"]);
        expect((await s.get("ep", "lost", T0 + 50_000))!).toMatchObject({ status: "IN_QUEUE", losses: 1 });
        await s.claim("ep", "dies-too", 1, T0 + 50_000);
        await s.forgetWorker("dies-too");
        await s.touchWorker("dies-too", "ep", "k", T0 + 50_000);
        await s.forgetWorker("dies-too");
        r = await s.sweep(T0 + 50_001, 30_000);
        expect(r.lost).toEqual(["lost"]);
        expect((await s.get("ep", "lost", T0 + 50_001))!.error).toContain("worker dies-too was lost");
      }),
    );

    test(
      "returned jobs go back in their place, IN_QUEUE, with no loss counted; others' and finished ones stay",
      withStore(async (s) => {
        for (const id of ["a", "b", "c"]) await s.enqueue(newJob(id), T0);
        const [a, b] = await s.claim("ep", "w", 2, T0);
        await s.finish("w", b!.id, { output: 1 }, false, T0);
        await s.returnJobs("other", [a!.id], T0); // not that worker's
        expect((await s.get("ep", "a", T0))!.status).toBe("IN_PROGRESS");
        await s.returnJobs("w", [a!.id, b!.id], T0);
        expect((await s.get("ep", "a", T0))!).toMatchObject({ status: "IN_QUEUE", losses: 0 });
        expect((await s.get("ep", "b", T0))!.status).toBe("COMPLETED");
        expect((await s.health("ep", T0, 60_000)).jobs).toMatchObject({ inQueue: 2, inProgress: 0, completed: 1 });
        expect(await s.queuePosition("ep", "a", T0)).toBe(0);
        expect((await s.claim("ep", "w2", 5, T0)).map((j) => j.id)).toEqual(["a", "c"]);
      }),
    );

    test(
      "scaling stats leave lowPriority jobs out of the queue that scales",
      withStore(async (s) => {
        await s.enqueue(newJob("low", { policy: { ...policy, lowPriority: true } }), T0);
        await s.enqueue(newJob("n1"), T0 + 5);
        await s.enqueue(newJob("n2"), T0 + 9);
        await s.touchWorker("w", "ep", "k", T0 + 10);
        await s.claim("ep", "w", 1, T0 + 10); // takes "low"
        const stats = await s.scalingStats("ep", T0 + 10, 60_000);
        expect(stats).toEqual({
          queued: 2,
          queuedLowPriority: 0,
          inProgress: 1,
          oldestQueuedAt: T0 + 5,
          workers: [{ id: "w", running: 1, unhealthy: false, lastActive: T0 + 10 }],
        });
        await s.enqueue(newJob("low2", { policy: { ...policy, lowPriority: true } }), T0 + 11);
        expect((await s.scalingStats("ep", T0 + 11, 60_000)).queuedLowPriority).toBe(1);
      }),
    );

    test(
      "webhook calls are owed on final states, leased when taken, retried and forgotten",
      withStore(async (s) => {
        await s.enqueue(newJob("h", { webhook: "http://127.0.0.1:9/h" }), T0);
        await s.enqueue(newJob("c", { webhook: "http://127.0.0.1:9/c" }), T0);
        await s.claim("ep", "w", 1, T0);
        await s.finish("w", "h", { output: 1 }, false, T0);
        await s.cancel("ep", "c", T0);
        const due = await s.takeDueDeliveries(T0, 15_000, 10);
        expect(due.map((d) => [d.url, d.job.id, d.job.status, d.attempts]).sort()).toEqual([
          ["http://127.0.0.1:9/c", "c", "CANCELLED", 0],
          ["http://127.0.0.1:9/h", "h", "COMPLETED", 0],
        ]);
        expect(await s.takeDueDeliveries(T0 + 14_999, 15_000, 10)).toEqual([]);
        const h = due.find((d) => d.job.id === "h")!;
        await s.deliveryRetry(h.id, T0 + 10_000);
        await s.deliveryDone(due.find((d) => d.job.id === "c")!.id);
        const again = await s.takeDueDeliveries(T0 + 10_000, 15_000, 10);
        expect(again.map((d) => [d.id, d.attempts])).toEqual([[h.id, 1]]);
        await s.deliveryDone(h.id);
        expect(await s.takeDueDeliveries(T0 + 100_000, 15_000, 10)).toEqual([]);
      }),
    );

    test(
      "a call whose lease ran out and was finished by another holder is not retried or kept",
      withStore(async (s) => {
        await s.enqueue(newJob("l", { webhook: "http://127.0.0.1:9/l" }), T0);
        await s.cancel("ep", "l", T0);
        const [first] = await s.takeDueDeliveries(T0, 1_000, 10);
        const [second] = await s.takeDueDeliveries(T0 + 1_000, 1_000, 10); // the lease ran out
        expect(second!.id).toBe(first!.id);
        await s.deliveryDone(second!.id);
        await s.deliveryRetry(first!.id, T0 + 2_000);
        expect(await s.takeDueDeliveries(T0 + 100_000, 1_000, 10)).toEqual([]);
      }),
    );

    test(
      "request admission: per window and concurrent, refusals not counted, release frees a slot",
      withStore(async (s) => {
        const limit = { requests: 3, concurrent: 2 };
        const a = await s.admitRequest("ep:run", limit, 10_000, T0);
        const b = await s.admitRequest("ep:run", limit, 10_000, T0);
        expect([a.ok, b.ok]).toEqual([true, true]);
        expect(await s.admitRequest("ep:run", limit, 10_000, T0 + 1)).toEqual({ ok: false, why: "concurrent", retryAfterSeconds: 1 });
        if (a.ok) await a.release();
        expect((await s.admitRequest("ep:run", limit, 10_000, T0 + 2)).ok).toBe(true);
        expect(await s.admitRequest("ep:run", { requests: 3 }, 10_000, T0 + 2_500)).toEqual({
          ok: false,
          why: "window",
          retryAfterSeconds: 8,
        });
        expect((await s.admitRequest("ep:status", { requests: 3 }, 10_000, T0 + 2_500)).ok).toBe(true);
        expect((await s.admitRequest("ep:run", { requests: 3 }, 10_000, T0 + 10_000)).ok).toBe(true);
      }),
    );

    test(
      "keys: stored by hash, listed, revoked by id or name",
      withStore(async (s) => {
        await s.addKey({ id: "key_1", name: "ci", hash: "h1", createdAt: T0, scope: "full" });
        await s.addKey({ id: "key_2", name: "ro", hash: "h2", createdAt: T0 + 1, scope: "read-only", endpoints: ["a"] });
        expect(await s.findKey("h2")).toEqual({
          id: "key_2",
          name: "ro",
          hash: "h2",
          createdAt: T0 + 1,
          scope: "read-only",
          endpoints: ["a"],
        });
        expect(await s.findKey("nope")).toBeNull();
        expect((await s.listKeys()).map((k) => k.id)).toEqual(["key_1", "key_2"]);
        expect(await s.revokeKey("ci", T0 + 5)).toBe(true);
        expect(await s.revokeKey("ci", T0 + 6)).toBe(false);
        expect((await s.findKey("h1"))!.revokedAt).toBe(T0 + 5);
      }),
    );

    test(
      "queue position: exact through submits, takes, cancels, retries and a lost worker's job; per endpoint",
      withStore(async (s) => {
        const positions = async (ids: string[]) => Promise.all(ids.map((id) => s.queuePosition("ep", id, T0 + 10)));
        for (const id of ["a", "b", "c", "d", "e", "f"])
          await s.enqueue(newJob(id, { policy: { ...policy, lowPriority: id === "c" } }), T0);
        await s.enqueue(newJob("x", { endpointId: "other" }), T0);
        // lowPriority does not change the order jobs are taken in; another endpoint's jobs do not count.
        expect(await positions(["a", "b", "c", "d", "e", "f"])).toEqual([0, 1, 2, 3, 4, 5]);
        expect(await s.queuePosition("other", "x", T0)).toBe(0);
        expect(await s.queuePosition("other", "a", T0)).toBeNull();
        expect((await s.claim("ep", "w1", 2, T0 + 1)).map((j) => j.id)).toEqual(["a", "b"]);
        expect(await positions(["a", "b", "c", "d", "e", "f"])).toEqual([null, null, 0, 1, 2, 3]);
        await s.cancel("ep", "d", T0 + 2);
        expect(await positions(["c", "d", "e", "f"])).toEqual([0, null, 1, 2]);
        // A failed job retried goes to the back of the queue.
        await s.finish("w1", "a", { error: "boom" }, false, T0 + 3);
        await s.retry("ep", "a", T0 + 4);
        expect(await positions(["a", "c", "e", "f"])).toEqual([3, 0, 1, 2]);
        // A job whose worker is lost is re-queued in its place, ahead of later ones.
        await s.touchWorker("w1", "ep", "k", T0 + 1);
        expect((await s.sweep(T0 + 40_000, 30_000)).requeued).toEqual(["b"]);
        expect(await s.queuePosition("ep", "b", T0 + 40_000)).toBe(0);
        expect(await s.queuePosition("ep", "a", T0 + 40_000)).toBe(4);
        expect((await s.claim("ep", "w2", 1, T0 + 40_000)).map((j) => j.id)).toEqual(["b"]);
        await s.purgeQueue("ep", T0 + 40_000);
        expect(await s.queuePosition("ep", "c", T0 + 40_000)).toBeNull();
        expect(await s.queueDepth("ep", T0 + 40_000)).toBe(0);
      }),
    );

    test(
      "health and queue depth stay exact through every change, expired jobs leaving them before the sweep does",
      withStore(async (s) => {
        const jobs = (now: number) => s.health("ep", now, 60_000).then((h) => h.jobs);
        await s.enqueue(newJob("short", { policy: { ...policy, ttl: 10_000 } }), T0);
        for (const id of ["q1", "q2", "run", "done", "fail", "gone"]) await s.enqueue(newJob(id, { sync: id === "done" }), T0);
        expect(await jobs(T0)).toEqual({ completed: 0, failed: 0, inProgress: 0, inQueue: 7, retried: 0 });
        await s.cancel("ep", "gone", T0);
        await s.claim("ep", "w", 4, T0); // short, q1, q2, run
        await s.cancel("ep", "q1", T0);
        await s.finish("w", "q2", { output: 1 }, false, T0);
        await s.finish("w", "short", { error: "x" }, false, T0);
        expect(await jobs(T0)).toEqual({ completed: 1, failed: 1, inProgress: 1, inQueue: 2, retried: 0 });
        expect(await s.queueDepth("ep", T0)).toBe(2);
        await s.retry("ep", "short", T0 + 1);
        expect(await jobs(T0 + 1)).toEqual({ completed: 1, failed: 0, inProgress: 1, inQueue: 3, retried: 1 });
        // "short" (ttl 10 s, re-queued at T0 + 1) expires at T0 + 10_001, before any sweep.
        expect(await s.queueDepth("ep", T0 + 10_001)).toBe(2);
        expect(await jobs(T0 + 10_001)).toEqual({ completed: 1, failed: 0, inProgress: 1, inQueue: 2, retried: 1 });
        await s.touchWorker("w", "ep", "k", T0 + 10_001);
        await s.sweep(T0 + 10_001, 60_000);
        expect(await jobs(T0 + 10_001)).toEqual({ completed: 1, failed: 0, inProgress: 1, inQueue: 2, retried: 1 });
        expect(await s.queueDepth("ep", T0 + 10_001)).toBe(2);
      }),
    );

    test(
      "a job leaves the counts once the expiry its last change set has passed, though earlier reads saw later expiries",
      withStore(async (s) => {
        const jobs = (now: number) => s.health("ep", now, 60_000).then((h) => h.jobs);
        const keep = RETENTION.asyncMs;
        const quick = { ...policy, executionTimeout: 5_000 };
        // Each step first reads while every expiry is a day away, then makes one that comes sooner.
        for (const id of ["slow", "kept"]) await s.enqueue(newJob(id, { policy: quick }), T0);
        expect(await jobs(T0)).toMatchObject({ inQueue: 2 });
        await s.claim("ep", "w", 1, T0); // slow
        await s.touchWorker("w", "ep", "k", T0 + 6_000);
        await s.sweep(T0 + 6_000, 60_000); // slow timed out at T0 + 6 s: kept until then + keep
        expect(await jobs(T0 + 5_999 + keep)).toMatchObject({ failed: 1, inQueue: 1 });
        expect(await jobs(T0 + 6_000 + keep)).toMatchObject({ failed: 0, inQueue: 1 });

        const t1 = T0 + 6_000 + keep;
        await s.sweep(t1, 60_000);
        await s.enqueue(newJob("done", { policy: quick }), t1);
        expect(await jobs(t1)).toMatchObject({ failed: 0, inQueue: 2 });
        expect((await s.claim("ep", "w", 1, t1)).map((j) => j.id)).toEqual(["kept"]);
        await s.finish("w", "kept", { output: 1 }, false, t1);
        expect(await jobs(t1 + keep - 1)).toMatchObject({ completed: 1, inQueue: 1 });
        expect(await jobs(t1 + keep)).toMatchObject({ completed: 0, inQueue: 1 });

        const t2 = t1 + keep;
        await s.sweep(t2, 60_000);
        expect(await jobs(t2)).toMatchObject({ completed: 0, inQueue: 1 });
        await s.setExpiry("ep", "done", t2 + 1_000, t2);
        expect(await jobs(t2 + 999)).toMatchObject({ inQueue: 1 });
        expect(await jobs(t2 + 1_000)).toMatchObject({ inQueue: 0 });

        const t3 = t2 + 1_000;
        await s.sweep(t3, 60_000);
        await s.enqueue(newJob("again", { policy: { ...quick, ttl: 10_000 } }), t3);
        await s.enqueue(newJob("later"), t3);
        await s.claim("ep", "w", 1, t3);
        await s.finish("w", "again", { error: "x" }, false, t3);
        await s.sweep(t3 + 20_000, 60_000); // again's ttl has passed, but it is FAILED: kept
        expect(await jobs(t3 + 20_000)).toMatchObject({ failed: 1, inQueue: 1 });
        await s.retry("ep", "again", t3 + 20_000); // queued again, for its ttl of 10 s
        expect(await jobs(t3 + 29_999)).toMatchObject({ failed: 0, inQueue: 2 });
        expect(await jobs(t3 + 30_000)).toMatchObject({ failed: 0, inQueue: 1 });
      }),
    );

    test(
      "events: a queued job, a stop and a revoked key are announced",
      withStore(async (s) => {
        const heard: string[] = [];
        const offs = [topics.queue("ep"), topics.stop("w"), topics.keys].map((t) => s.events.on(t, () => heard.push(t)));
        await s.enqueue(newJob("e"), T0);
        await s.claim("ep", "w", 1, T0);
        await s.cancel("ep", "e", T0);
        await s.addKey({ id: "key_x", name: "x", hash: "hx", createdAt: T0, scope: "full" });
        await s.revokeKey("x", T0);
        for (let i = 0; i < 1_000 && heard.length < 3; i++) await Bun.sleep(1);
        expect(heard.sort()).toEqual([topics.keys, topics.queue("ep"), topics.stop("w")].sort());
        offs.forEach((off) => off());
      }),
    );

    test(
      "failed starts: an endpoint's run counts them, keeps its first time and whether any was permanent, ends when a worker starts; changes are announced",
      withStore(async (s) => {
        let heard = 0;
        const off = s.events.on(topics.startFailures, () => heard++);
        const failure = (at: number, permanent = false) => ({
          message: `failed at ${at}`,
          at,
          workerId: "w",
          exitCode: 1,
          output: "out\nlast line",
          permanent,
          retryAfterS: 2,
        });
        expect(await s.startFailureRuns()).toEqual({});
        expect(await s.addStartFailure("ep", failure(T0))).toEqual({ attempts: 1, firstAt: T0, permanent: false, last: failure(T0) });
        expect(await s.addStartFailure("ep", failure(T0 + 5, true))).toEqual({
          attempts: 2,
          firstAt: T0,
          permanent: true,
          last: failure(T0 + 5, true),
        });
        expect(await s.addStartFailure("ep", failure(T0 + 9))).toEqual({
          attempts: 3,
          firstAt: T0,
          permanent: true,
          last: failure(T0 + 9),
        });
        await s.addStartFailure("other", { ...failure(T0 + 1), exitCode: undefined, signal: "SIGKILL" });
        expect(await s.startFailureRuns()).toEqual({
          ep: { attempts: 3, firstAt: T0, permanent: true, last: failure(T0 + 9) },
          other: { attempts: 1, firstAt: T0 + 1, permanent: false, last: { ...failure(T0 + 1), exitCode: undefined, signal: "SIGKILL" } },
        });
        await s.endStartFailures("ep");
        expect(await s.startFailureRuns()).toEqual({
          other: { attempts: 1, firstAt: T0 + 1, permanent: false, last: { ...failure(T0 + 1), exitCode: undefined, signal: "SIGKILL" } },
        });
        // A new run starts from nothing.
        expect(await s.addStartFailure("ep", failure(T0 + 20))).toEqual({
          attempts: 1,
          firstAt: T0 + 20,
          permanent: false,
          last: failure(T0 + 20),
        });
        await until(() => heard >= 6, "six announcements");
        off();
      }),
    );
  });
}
