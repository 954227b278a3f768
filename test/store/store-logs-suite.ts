import { describe, expect, test } from "bun:test";
import { cutLine, logLineBytes, type JobLogLine } from "../../runtime/protocol/job-log.ts";
import { topics } from "../../runtime/server/store/store-events.ts";
import type { NewJob, Store } from "../../runtime/server/store/store.ts";
import { RETENTION } from "./store-suite.ts";

const T0 = 1_790_000_000_000;
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const newJob = (id: string, over: Partial<NewJob> = {}): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false, ...over });
const line = (message: string, at = T0, level: JobLogLine["level"] = "info"): JobLogLine => ({ time: at, level, message });
const MIB = 1024 * 1024;

/** Jobs' log lines, the same on every Store backend. */
export function runStoreLogsSuite(name: string, open: () => Promise<Store>) {
  const withStore = (fn: (s: Store) => Promise<void>) => async () => {
    const store = await open();
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  };

  describe(`${name} store: job logs`, () => {
    test(
      "the running worker's lines are kept in order and read from any index; others' are refused",
      withStore(async (s) => {
        await s.enqueue(newJob("a"), T0);
        await s.enqueue(newJob("queued"), T0);
        await s.claim("ep", "w", 1, T0);
        let heard = 0;
        const off = s.events.on(topics.job("a"), () => heard++);
        expect(await s.appendLogs("w", "a", [line("one"), line("two", T0 + 1, "stdout")], MIB, T0)).toEqual({ truncated: false });
        expect(await s.appendLogs("w", "a", [line("three ✓", T0 + 2, "error")], MIB, T0)).toEqual({ truncated: false });
        off();
        expect(heard).toBeGreaterThan(0);
        const all = [line("one"), line("two", T0 + 1, "stdout"), line("three ✓", T0 + 2, "error")];
        expect(await s.readLogs("ep", "a", 0, T0)).toEqual({ lines: all, truncated: false });
        expect(await s.readLogs("ep", "a", 2, T0)).toEqual({ lines: all.slice(2), truncated: false });
        expect(await s.readLogs("ep", "a", 3, T0)).toEqual({ lines: [], truncated: false });
        // Another worker, a queued job, an unknown one: nothing kept. Another endpoint sees no job.
        expect(await s.appendLogs("other", "a", [line("x")], MIB, T0)).toBeNull();
        expect(await s.appendLogs("w", "queued", [line("x")], MIB, T0)).toBeNull();
        expect(await s.appendLogs("w", "nope", [line("x")], MIB, T0)).toBeNull();
        expect(await s.readLogs("ep", "queued", 0, T0)).toEqual({ lines: [], truncated: false });
        expect(await s.readLogs("other-ep", "a", 0, T0)).toBeNull();
        expect(await s.readLogs("ep", "nope", 0, T0)).toBeNull();
        // Once the job has ended its worker adds nothing; what it wrote stays readable.
        await s.finish("w", "a", { output: 1 }, false, T0 + 3);
        expect(await s.appendLogs("w", "a", [line("late")], MIB, T0 + 4)).toBeNull();
        expect((await s.readLogs("ep", "a", 0, T0 + 4))?.lines).toEqual(all);
      }),
    );

    test(
      "a log stops at its limit with one line that says so; later lines are refused as cut",
      withStore(async (s) => {
        await s.enqueue(newJob("big"), T0);
        await s.claim("ep", "w", 1, T0);
        const each = logLineBytes(line("x".repeat(100)));
        const max = each * 3 + 10;
        expect(await s.appendLogs("w", "big", [line("x".repeat(100)), line("x".repeat(100))], max, T0)).toEqual({ truncated: false });
        expect(await s.appendLogs("w", "big", [line("x".repeat(100)), line("fourth ".repeat(20)), line("fifth")], max, T0 + 5)).toEqual({
          truncated: true,
        });
        expect(await s.appendLogs("w", "big", [line("sixth")], max, T0 + 6)).toEqual({ truncated: true });
        const read = await s.readLogs("ep", "big", 0, T0 + 6);
        expect(read).toEqual({
          lines: [line("x".repeat(100)), line("x".repeat(100)), line("x".repeat(100)), cutLine(T0 + 5, max)],
          truncated: true,
        });
        expect(read?.lines.at(-1)?.message).toBe(`log limit of ${max} bytes reached: later lines of this job are not kept`);
      }),
    );

    test(
      "a retried job's log goes on after its first run's; the lines go with the job when it expires",
      withStore(async (s) => {
        await s.enqueue(newJob("r"), T0);
        await s.claim("ep", "w", 1, T0);
        await s.appendLogs("w", "r", [line("first run")], MIB, T0);
        await s.finish("w", "r", { error: "boom" }, false, T0 + 1);
        expect((await s.retry("ep", "r", T0 + 2)).kind).toBe("retried");
        await s.claim("ep", "w2", 1, T0 + 2);
        await s.appendLogs("w2", "r", [line("second run", T0 + 3)], MIB, T0 + 3);
        expect((await s.readLogs("ep", "r", 0, T0 + 3))?.lines).toEqual([line("first run"), line("second run", T0 + 3)]);
        await s.finish("w2", "r", { output: 1 }, false, T0 + 4);
        // Past its retention the job is swept, and its lines with it: a new job of that id starts with none.
        await s.sweep(T0 + 4 + RETENTION.asyncMs, 60_000);
        expect(await s.readLogs("ep", "r", 0, T0 + 4 + RETENTION.asyncMs)).toBeNull();
        const later = T0 + 5 + RETENTION.asyncMs;
        await s.enqueue(newJob("r"), later);
        expect(await s.readLogs("ep", "r", 0, later)).toEqual({ lines: [], truncated: false });
      }),
    );
  });
}
