import { describe, expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../runtime/clock.ts";
import { EXIT_REPLACE } from "../../runtime/worker/worker-loop.ts";
import { defineHandler, HandlerError } from "../../sdk/index.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { startLoop } from "../helpers/worker-loop.ts";

/** Long-polls wake on events, so a parked take or stop poll costs no time. */
const polling = { server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 0 } };

async function status(srv: TestServer, id: string) {
  return (await srv.json("GET", `/v2/echo/status/${id}`))[1];
}
async function settled(srv: TestServer, id: string) {
  return until(async () => {
    const s = await status(srv, id);
    return ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(s.status) && s;
  }, `job ${id} to finish`);
}
async function submit(srv: TestServer, body: unknown): Promise<string> {
  const [code, res] = await srv.json("POST", "/v2/echo/run", body);
  if (code !== 200) throw new Error(`submit failed: ${JSON.stringify(res)}`);
  return res.id;
}

/** A promise with its resolve, to hold a handler at a point the test chooses. */
function gate<T = void>() {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

describe("handlers", () => {
  test("a plain handler's return value is the job's output", async () => {
    await using srv = await startTestServer(polling);
    await using w = startLoop(
      srv,
      defineHandler({
        input: z.object({ a: z.number(), b: z.number() }),
        handler: async (job) => ({ sum: job.input.a + job.input.b }),
      }),
    );
    const id = await submit(srv, { input: { a: 2, b: 3 } });
    expect(await settled(srv, id)).toEqual({
      id,
      status: "COMPLETED",
      output: { sum: 5 },
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: w.workerId,
    });
  });

  test("a generator streams each yield; with returnAggregateStream the chunks are also the output", async () => {
    await using srv = await startTestServer(polling);
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({ text: z.string() }),
        returnAggregateStream: true,
        async *handler(job) {
          for (const word of job.input.text.split(" ")) yield { word };
        },
      }),
    );
    const id = await submit(srv, { input: { text: "one two three" } });
    const done = await settled(srv, id);
    expect(done.output).toEqual([{ word: "one" }, { word: "two" }, { word: "three" }]);
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1].stream).toEqual([
      { output: { word: "one" } },
      { output: { word: "two" } },
      { output: { word: "three" } },
    ]);
  });

  test("without returnAggregateStream a generator's chunks are streamed and the output is empty", async () => {
    await using srv = await startTestServer(polling);
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        async *handler() {
          yield "a";
          yield "b";
        },
      }),
    );
    const id = await submit(srv, { input: {} });
    expect((await settled(srv, id)).output).toEqual([]);
    expect((await srv.json("GET", `/v2/echo/stream/${id}`))[1].stream).toEqual([{ output: "a" }, { output: "b" }]);
  });

  test("input that fails the schema ends the job FAILED naming the field; the handler never runs", async () => {
    await using srv = await startTestServer(polling);
    let calls = 0;
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({ prompt: z.string(), steps: z.number().int().max(8) }),
        handler: async () => ++calls,
      }),
    );
    const id = await submit(srv, { input: { prompt: "x", steps: 9 } });
    const failed = await settled(srv, id);
    expect(failed.status).toBe("FAILED");
    expect(failed.error).toStartWith("Invalid parameter: steps:");
    expect(calls).toBe(0);
  });

  test("a thrown error ends the job FAILED in RunPod's error shape", async () => {
    await using srv = await startTestServer(polling);
    await using w = startLoop(
      srv,
      defineHandler({
        input: z.object({ kind: z.string() }),
        handler: async (job) => {
          if (job.input.kind === "typed") throw new HandlerError("prompt too long", { type: "PromptTooLong" });
          throw new RangeError("boom");
        },
      }),
    );
    const plain = await settled(srv, await submit(srv, { input: { kind: "plain" } }));
    expect(plain.status).toBe("FAILED");
    expect(JSON.parse(plain.error)).toEqual({
      error_type: "RangeError",
      error_message: "boom",
      error_traceback: expect.stringContaining("RangeError: boom"),
      hostname: expect.any(String),
      worker_id: w.workerId,
      runpod_version: "spool",
    });
    const typed = await settled(srv, await submit(srv, { input: { kind: "typed" } }));
    expect(JSON.parse(typed.error)).toMatchObject({ error_type: "PromptTooLong", error_message: "prompt too long" });
  });

  test("progress is visible in /status while the job runs", async () => {
    await using srv = await startTestServer(polling);
    const release = gate();
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        handler: async (_job, ctx) => {
          await ctx.progress({ percent: 50 });
          await release.promise;
          return "done";
        },
      }),
    );
    const id = await submit(srv, { input: {} });
    const running = await until(async () => {
      const s = await status(srv, id);
      return s.output !== undefined && s;
    }, "progress");
    expect(running).toMatchObject({ status: "IN_PROGRESS", output: { percent: 50 } });
    release.open();
    expect((await settled(srv, id)).output).toBe("done");
  });
});

describe("concurrency", () => {
  test("concurrency > 1 runs that many jobs at once on one worker", async () => {
    await using srv = await startTestServer(polling);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await submit(srv, { input: { i } }));
    const release = gate();
    let inFlight = 0;
    let most = 0;
    await using w = startLoop(
      srv,
      defineHandler({
        input: z.object({ i: z.number() }),
        concurrency: 3,
        handler: async (job) => {
          most = Math.max(most, ++inFlight);
          await release.promise;
          inFlight--;
          return job.input.i;
        },
      }),
    );
    await until(async () => (await srv.json("GET", "/v2/echo/health"))[1].jobs.inProgress === 3, "3 jobs running");
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toMatchObject({ inProgress: 3, inQueue: 1 });
    expect(w.loop.runningIds.sort()).toEqual(ids.slice(0, 3).sort());
    release.open();
    for (const [i, id] of ids.entries()) expect((await settled(srv, id)).output).toBe(i);
    expect(most).toBe(3);
  });

  test("a concurrency function is called with the current concurrency (RunPod's concurrency_modifier)", async () => {
    await using srv = await startTestServer(polling);
    const seen: number[] = [];
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        concurrency: (current) => {
          seen.push(current);
          return Math.min(current + 1, 4);
        },
        handler: async () => "ok",
      }),
    );
    // The modifier is asked once per turn of the take loop: at start and after each take.
    for (let i = 0; i < 4; i++) await settled(srv, await submit(srv, { input: {} }));
    await until(() => seen.length >= 5, "five turns of the loop");
    expect(seen.slice(0, 5)).toEqual([1, 2, 3, 4, 4]);
  });

  test("a long-running worker holds no more abort listeners after 60 jobs than after 10", async () => {
    // Counts "abort" listeners added to signals not yet aborted and not removed since: each one
    // stays in memory, and adding one costs O(listeners) (it grew by one per job before).
    const live = new Map<EventTarget, Set<unknown>>();
    const { addEventListener: add, removeEventListener: remove } = EventTarget.prototype;
    EventTarget.prototype.addEventListener = function (this: EventTarget, type: string, fn: any, opts?: any) {
      if (type === "abort" && this instanceof AbortSignal) live.set(this, (live.get(this) ?? new Set()).add(fn));
      return add.call(this, type, fn, opts);
    };
    EventTarget.prototype.removeEventListener = function (this: EventTarget, type: string, fn: any, opts?: any) {
      if (type === "abort") live.get(this)?.delete(fn);
      return remove.call(this, type, fn, opts);
    };
    const count = () => [...live].reduce((n, [signal, fns]) => n + ((signal as AbortSignal).aborted ? 0 : fns.size), 0);
    try {
      await using srv = await startTestServer(polling);
      await using _w = startLoop(srv, defineHandler({ input: z.object({}), handler: async () => "ok" }));
      const run = async (n: number) => {
        for (let i = 0; i < n; i++) await settled(srv, await submit(srv, { input: {} }));
      };
      await run(10);
      const after10 = count();
      await run(50);
      expect(count()).toBeLessThanOrEqual(after10 + 2);
    } finally {
      EventTarget.prototype.addEventListener = add;
      EventTarget.prototype.removeEventListener = remove;
    }
  });
});

describe("cancel, timeout, shutdown", () => {
  test("cancelling a queued job means the handler never sees it", async () => {
    await using srv = await startTestServer(polling);
    const id = await submit(srv, { input: {} });
    await srv.json("POST", `/v2/echo/cancel/${id}`);
    const seen: string[] = [];
    await using _w = startLoop(srv, defineHandler({ input: z.object({}), handler: async (job) => seen.push(job.id) }));
    const next = await submit(srv, { input: {} });
    await settled(srv, next);
    expect(seen).toEqual([next]);
  });

  test("cancelling a running job fires ctx.signal with JobCancelled; no result is posted", async () => {
    await using srv = await startTestServer(polling);
    const reasons: string[] = [];
    await using _w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        handler: (_job, ctx) =>
          new Promise((_, reject) =>
            ctx.signal.addEventListener("abort", () => {
              reasons.push((ctx.signal.reason as Error).name);
              reject(ctx.signal.reason);
            }),
          ),
      }),
    );
    const id = await submit(srv, { input: {} });
    await until(async () => (await status(srv, id)).status === "IN_PROGRESS", "job to start");
    await srv.json("POST", `/v2/echo/cancel/${id}`);
    await until(() => reasons.length > 0, "the handler's signal");
    expect(reasons).toEqual(["JobCancelled"]);
    expect(await status(srv, id)).toEqual({
      id,
      status: "CANCELLED",
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: expect.any(String),
    });
  });

  test("at the deadline ctx.signal fires; a handler that ignores it ends its process after the grace period, and the job is TIMED_OUT", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { takeWaitMs: 80_000, stopWaitMs: 80_000 } });
    let signalled: string | undefined;
    await using w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        handler: (_job, ctx) => {
          ctx.signal.addEventListener("abort", () => (signalled = (ctx.signal.reason as Error).name));
          return new Promise(() => {}); // stuck: ignores its signal
        },
      }),
      { clock, timeoutGraceMs: 5_000, drainTimeoutMs: 0 },
    );
    const id = await submit(srv, { input: {}, policy: { executionTimeout: 6_000 } });
    await until(async () => (await status(srv, id)).status === "IN_PROGRESS", "job to start");
    clock.advance(6_000);
    await srv.server.sweep();
    await until(() => signalled, "the handler's signal");
    expect(signalled).toBe("JobTimedOut");
    expect(w.exits).toEqual([]);
    expect((await status(srv, id)).status).toBe("TIMED_OUT");

    const signalledAt = clock.now();
    clock.advance(4_999);
    // The grace is still running on the clock: a shorter one would have been woken by this advance.
    expect(clock.dueTimes).toContain(signalledAt + 5_000);
    expect(w.exits).toEqual([]);
    clock.advance(1);
    await until(() => w.exits.length > 0, "the process to be ended");
    expect(w.exits).toEqual([EXIT_REPLACE]);
  });

  test("shutdown stops taking jobs and lets the running one finish and post its result", async () => {
    await using srv = await startTestServer(polling);
    const release = gate();
    const w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        handler: async () => {
          await release.promise;
          return "finished";
        },
      }),
    );
    const id = await submit(srv, { input: {} });
    await until(async () => (await status(srv, id)).status === "IN_PROGRESS", "job to start");
    w.loop.shutdown();
    const queued = await submit(srv, { input: {} });
    release.open();
    expect(await w.finished).toBe(0);
    expect((await status(srv, id)).output).toBe("finished");
    expect((await status(srv, queued)).status).toBe("IN_QUEUE");
  });

  test("ctx.refreshWorker() posts stopPod with the result and ends the worker for replacement", async () => {
    await using srv = await startTestServer(polling);
    const w = startLoop(
      srv,
      defineHandler({
        input: z.object({}),
        handler: async (_job, ctx) => {
          ctx.refreshWorker();
          return "ok";
        },
      }),
    );
    const id = await submit(srv, { input: {} });
    expect(await w.finished).toBe(EXIT_REPLACE);
    expect((await status(srv, id)).output).toBe("ok");
  });
});
