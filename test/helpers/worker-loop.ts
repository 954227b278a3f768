import { ManualClock, systemClock, type Clock } from "../../runtime/clock.ts";
import { silentLog } from "../../runtime/log.ts";
import { WorkerApi } from "../../runtime/worker/worker-api.ts";
import { WorkerLoop } from "../../runtime/worker/worker-loop.ts";
import { urlsFromFlags, workerEndpoints } from "../../runtime/worker/worker-urls.ts";
import type { Handler } from "../../sdk/index.ts";
import type { TestServer } from "./test-server.ts";

export interface TestLoop extends AsyncDisposable {
  loop: WorkerLoop;
  workerId: string;
  /** Exit codes the loop asked for (a stuck handler past its grace ends the process). */
  exits: number[];
  /** Resolves with run()'s exit code once the loop has drained. */
  finished: Promise<number>;
}

/** A real WorkerLoop in this process, speaking HTTP to the test server. */
export function startLoop(
  srv: TestServer,
  handler: Handler<any, any, any>,
  options: {
    endpoint?: string;
    workerId?: string;
    clock?: Clock;
    timeoutGraceMs?: number;
    drainTimeoutMs?: number;
    exitWhenIdleMs?: number;
    handlerOptions?: unknown;
  } = {},
): TestLoop {
  const workerId = options.workerId ?? `w-${crypto.randomUUID().slice(0, 6)}`;
  const clock = options.clock ?? systemClock;
  const urls = workerEndpoints(urlsFromFlags(srv.url, options.endpoint ?? "echo"), workerId);
  const exits: number[] = [];
  const loop = new WorkerLoop({
    handler,
    api: new WorkerApi(urls, srv.key, clock, silentLog),
    workerId,
    clock,
    log: silentLog,
    pingIntervalMs: 60_000,
    timeoutGraceMs: options.timeoutGraceMs ?? 5_000,
    drainTimeoutMs: options.drainTimeoutMs ?? 5_000,
    exitWhenIdleMs: options.exitWhenIdleMs,
    exit: (code) => exits.push(code),
    handlerOptions: options.handlerOptions,
  });
  const finished = loop.run();
  return {
    loop,
    workerId,
    exits,
    finished,
    async [Symbol.asyncDispose]() {
      loop.shutdown();
      // On a manual clock the drain's own waits pass only when time is moved.
      let done = false;
      void finished.then(() => (done = true));
      while (!done) {
        if (clock instanceof ManualClock) clock.advance(1_000);
        await Bun.sleep(0);
      }
    },
  };
}
