/** The endpoint the workers of the worker start benchmark are pointed at. */
export const WORKER_START_ENDPOINT = "bench";

/** One armed run: what the recording server saw of its worker. */
export interface Run {
  /** performance.now() when the first request of any kind arrived. */
  firstRequestAt?: number;
  firstTake: PromiseWithResolvers<number>;
  /** Resolved when the run is over: job-takes after the first are held open until then. */
  ended: PromiseWithResolvers<void>;
  requests: Record<string, number>;
}

/**
 * A tiny server in this process standing in for Spool's worker protocol: it records when the
 * armed run's worker first asks for work, long-polls later job-takes, and counts requests that
 * come while no run is armed (a worker left over from an earlier run) as strays.
 */
export function startRecorder(longPollMs: number) {
  let current: Run | null = null;
  const strays: string[] = [];
  const assertNoStrays = (when: string) => {
    if (strays.length) throw new Error(`requests from a leftover worker arrived ${when}: ${strays.join(", ")}`);
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const at = performance.now();
      const path = new URL(req.url).pathname;
      if (!path.startsWith(`/v2/${WORKER_START_ENDPOINT}/`)) return new Response("not found", { status: 404 });
      // A worker with more than one free slot takes in batches: job-take-batch counts as a take.
      const kind = (path.split("/")[3] ?? "").replace(/^job-take-batch$/, "job-take");
      const run = current;
      if (!run) {
        strays.push(kind);
      } else {
        run.firstRequestAt ??= at;
        run.requests[kind] = (run.requests[kind] ?? 0) + 1;
      }
      switch (kind) {
        case "job-take":
          if (run?.requests["job-take"] === 1) {
            run.firstTake.resolve(at);
          } else if (run) {
            // Long-poll as the real server does, so the worker does not spin on 204s.
            await Promise.race([run.ended.promise, Bun.sleep(longPollMs)]);
          }
          return new Response(null, { status: 204 });
        case "ping":
          return new Response("");
        default: // job-stop, and anything else
          return new Response(null, { status: 204 });
      }
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    /** Starts a run; throws if a leftover worker sent requests since the last one. */
    arm(): Run {
      assertNoStrays("between runs");
      current = { firstTake: Promise.withResolvers(), ended: Promise.withResolvers(), requests: {} };
      return current;
    },
    /** Ends the run: later requests are strays, held job-takes are answered. */
    disarm(run: Run): void {
      current = null;
      run.ended.resolve();
    },
    assertNoStrays,
    stop: () => server.stop(true),
  };
}
