export interface ReceivedCall {
  headers: Record<string, string>;
  body: string;
}

/**
 * A real HTTP receiver on a loopback port that answers each call with the next scripted status
 * (the last one repeats), recording every call.
 */
export function startReceiver(statuses: number[] = [200]) {
  const calls: ReceivedCall[] = [];
  let waiters: (() => void)[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      calls.push({ headers: Object.fromEntries(req.headers), body: await req.text() });
      const status = statuses[Math.min(calls.length - 1, statuses.length - 1)]!;
      for (const w of waiters) w();
      waiters = [];
      return new Response(status === 200 ? "ok" : "nope", { status });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    calls,
    /** Resolves once `n` calls have arrived. */
    async received(n: number): Promise<ReceivedCall[]> {
      while (calls.length < n) await new Promise<void>((r) => waiters.push(r));
      return calls;
    },
    async [Symbol.asyncDispose]() {
      await server.stop(true);
    },
  };
}
