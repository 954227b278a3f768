import { expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../runtime/clock.ts";
import { silentLog } from "../../runtime/log.ts";
import type { WorkerIpcMessage } from "../../runtime/protocol/worker-ipc.ts";
import { WorkerApi } from "../../runtime/worker/worker-api.ts";
import { WorkerLoop } from "../../runtime/worker/worker-loop.ts";
import { urlsFromFlags, workerEndpoints } from "../../runtime/worker/worker-urls.ts";
import { defineHandler } from "../../sdk/index.ts";
import { until } from "../helpers/until.ts";

/**
 * A queue server whose job-done answers 503 (restarting, say): the worker retries its result post
 * on its clock. One job is handed out; every other take is empty.
 */
function unavailableResults() {
  let handedOut = false;
  const posts: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path.includes("/job-take/")) {
        if (handedOut) return new Response(null, { status: 204 });
        handedOut = true;
        return Response.json({
          id: "job-1",
          input: {},
          policy: { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 },
          deadline: Date.now() + 60_000,
        });
      }
      if (path.includes("/job-done/")) {
        posts.push(path);
        return Response.json({ error: "unavailable" }, { status: 503 });
      }
      return Response.json({});
    },
  });
  return { server, posts, [Symbol.dispose]: () => void server.stop(true) };
}

test("job-end reaches the owner as soon as the handler returns, before the result post's retries", async () => {
  using fake = unavailableResults();
  const clock = new ManualClock(Date.now());
  const messages: WorkerIpcMessage[] = [];
  const idle = (signal: AbortSignal) => new Promise<string[]>((resolve) => signal.addEventListener("abort", () => resolve([])));
  const loop = new WorkerLoop({
    handler: defineHandler({ input: z.object({}), handler: () => "done" }),
    api: new WorkerApi(workerEndpoints(urlsFromFlags(fake.server.url.origin, "ep"), "w-1"), "key", clock, silentLog),
    workerId: "w-1",
    clock,
    log: silentLog,
    pingIntervalMs: 60_000,
    timeoutGraceMs: 5_000,
    drainTimeoutMs: 5_000,
    exit: () => {},
    owner: { report: (m) => void messages.push(m), stops: idle },
  });
  const finished = loop.run();

  // The first post was refused and the retry waits on the clock, which does not move: the job's
  // end is known to the owner all the same, so its deadline cannot end the process.
  await until(() => fake.posts.length === 1, "the first result post");
  await until(() => messages.some((m) => m.type === "job-end"), "job-end on the watch channel");
  expect(messages.filter((m) => m.type !== "hello")).toEqual([
    { type: "job-start", jobId: "job-1", timeoutMs: 60_000, graceMs: 5_000 },
    { type: "job-end", jobId: "job-1" },
  ]);
  expect(fake.posts.length).toBe(1);

  // The post is still retried on its schedule (RESULT_RETRY_MS), and the worker then stops cleanly.
  // (Time moves in steps until each retry is sent: the worker may not have begun its wait yet.)
  for (let sent = 2; sent <= 4; sent++) {
    await until(() => {
      clock.advance(500);
      return fake.posts.length >= sent;
    }, `result post ${sent}`);
  }
  loop.shutdown();
  expect(await finished).toBe(0);
  expect(fake.posts.length).toBe(4); // the first try and RESULT_RETRY_MS's three retries
});
