import { expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { silentLog } from "../../runtime/log.ts";
import { MAX_LINE_CHARS, readJsonLines } from "../../runtime/process/json-lines.ts";
import { JobWatchdog } from "../../runtime/process/process-stop.ts";

/** A process that is never really signalled: what the watchdog would do is read off the clock. */
function fakeProcess() {
  const exited = Promise.withResolvers<number>();
  const signals: string[] = [];
  return { pid: 1, exited: exited.promise, kill: (s?: NodeJS.Signals | number) => void signals.push(String(s)), signals };
}

test("a job's deadline and grace as a worker reports them are clamped: a huge or negative figure cannot keep a stuck handler alive for ever, nor a bad one fire at once", async () => {
  const clock = new ManualClock(0);
  const proc = fakeProcess();
  const watchdog = new JobWatchdog(proc, 500, silentLog, clock);
  watchdog.message({ type: "job-start", jobId: "huge", timeoutMs: 1e300, graceMs: -5 });
  watchdog.message({ type: "job-start", jobId: "nan", timeoutMs: "soon", graceMs: null });
  // Deadlines of at most a week (RunPod's longest executionTimeout); not a number: now.
  expect(clock.dueTimes.sort((a, b) => a - b)).toEqual([0, 7 * 24 * 3600_000]);
});

test("a line longer than the protocol's longest is dropped whole, and the lines after it are still read", async () => {
  const seen: unknown[] = [];
  const long = "x".repeat(MAX_LINE_CHARS + 10);
  const body = new Blob([`{"a":1}\n`, long.slice(0, 40_000), long.slice(40_000), `{"b":2}\n`, `"${long}"\n`, `{"c":3}\n`]);
  await readJsonLines(body.stream(), (m) => seen.push(m));
  // The over-long line ended with the one after it ({"b":2} was its tail): both dropped.
  expect(seen).toEqual([{ a: 1 }, { c: 3 }]);
});
