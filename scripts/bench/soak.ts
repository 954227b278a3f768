#!/usr/bin/env bun
/**
 * A long run at a steady queue: does a server or a worker get slower or bigger the more jobs it
 * has handled? One `spool serve` on the embedded store, `--workers` real worker processes
 * (`spool worker handlers/examples/echo.ts`, the runtime users run) and `--submitters` submit
 * loops in this process that pause while more than `--queued` jobs wait, so the queue stays
 * about that deep however long it runs. Per window: jobs completed per second, CPU per job of
 * the server and of the workers, the server's RSS and JS heap, a worker's RSS. The reference is
 * the run's own first window: the last window against it is printed as ratios. With `--store
 * redis` the server keeps its jobs on a fresh redis-server (AOF on) instead.
 *
 *   bun scripts/bench/soak.ts [--store embedded|redis] [--seconds 120] [--window 15] [--workers 4] [--submitters 8] [--queued 2000]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { processCpu } from "./harness/process-cpu.ts";
import { stopProcess } from "./harness/processes.ts";
import { queueClient } from "./harness/queue-client.ts";
import { createQueueRig, ENDPOINT } from "./harness/queue-rig.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { printTable } from "./harness/table.ts";

const cli = benchCli(
  "bench-soak",
  "usage: bun scripts/bench/soak.ts [--store embedded|redis] [--seconds 120] [--window 15] [--workers 4] [--submitters 8] [--queued 2000]",
);
const { values: flags } = parseArgs({
  options: {
    store: { type: "string", default: "embedded" },
    seconds: { type: "string", default: "120" },
    window: { type: "string", default: "15" },
    workers: { type: "string", default: "4" },
    submitters: { type: "string", default: "8" },
    queued: { type: "string", default: "2000" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
if (flags.store !== "embedded" && flags.store !== "redis") cli.fail(`--store must be embedded or redis, got ${flags.store}`);
const ON_REDIS = flags.store === "redis";
const SECONDS = cli.int("seconds", flags.seconds!);
const WINDOW = cli.int("window", flags.window!);
const WORKERS = cli.int("workers", flags.workers!);
const SUBMITTERS = cli.int("submitters", flags.submitters!);
const QUEUED = cli.int("queued", flags.queued!);
/** Untimed, before the first window: the processes start and their JIT warms. */
const WARM_UP_MS = 5_000;

const rig = createQueueRig({ jobs: 0, warm: 0, clients: SUBMITTERS, runsync: 0 });
const workers: Bun.Subprocess[] = [];
const cleanup = exitCleanup(
  async () => {
    await Promise.all(workers.map((w) => stopProcess(w, 5_000)));
    await rig.close();
  },
  { onExit: () => (workers.forEach((w) => w.kill("SIGKILL")), rig.killAll()) },
);

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;

interface Window {
  endS: number;
  done: number;
  jobsPerS: number;
  serverCpuUs: number;
  workersCpuUs: number;
  serverRss: number;
  serverHeap: number;
  workerRss: number;
  queued: number;
}

async function main(): Promise<void> {
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(
    `spool soak (${ON_REDIS ? "Redis" : "embedded"} store): ${SECONDS} s in windows of ${WINDOW} s, ${WORKERS} worker processes, ${SUBMITTERS} submit loops, ~${QUEUED} jobs queued`,
  );
  console.log(`machine: ${info}\n`);
  const store = ON_REDIS ? `${(await rig.startRedis()).url}?prefix=soak` : undefined;
  const server = await rig.startServer("soak", { store });
  const c = queueClient(server);
  for (let i = 0; i < WORKERS; i++) {
    const args = ["worker", join(REPO_ROOT, "handlers/examples/echo.ts"), "--url", server.url, "--endpoint", ENDPOINT];
    args.push("--api-key", server.key, "--worker-id", `soak-${i}`, "--no-supervise");
    workers.push(
      Bun.spawn([process.execPath, join(REPO_ROOT, "runtime/cli.ts"), ...args], { stdin: "ignore", stdout: "ignore", stderr: "ignore" }),
    );
  }

  const stop = new AbortController();
  let queued = 0;
  let failure: unknown;
  const poll = (async () => {
    while (!stop.signal.aborted) {
      queued = (await c.health()).jobs.inQueue;
      await Bun.sleep(50);
    }
  })();
  const submit = async () => {
    while (!stop.signal.aborted) {
      if (queued > QUEUED) await Bun.sleep(5);
      else await c.run({ n: 1 });
    }
  };
  const loops = [poll, ...Array.from({ length: SUBMITTERS }, submit)].map((p) => p.catch((e) => (failure ??= e)));

  const sample = async () => {
    const h = await c.health();
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.key}` } })).text();
    return {
      at: performance.now(),
      // The server's own counter: /health's completed count drops as retention removes old jobs (30 min).
      done: Number(/^spool_jobs_ended_total\{[^}]*status="COMPLETED"[^}]*\} (\S+)/m.exec(metrics)?.[1] ?? Number.NaN),
      queued: h.jobs.inQueue,
      server: processCpu(server.proc.pid),
      workers: workers.reduce((sum, w) => sum + processCpu(w.pid), 0),
      heap: Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(metrics)?.[1]) / 2 ** 20,
    };
  };

  await Bun.sleep(WARM_UP_MS);
  const start = await sample();
  let prev = start;
  const windows: Window[] = [];
  for (let t = WINDOW; t <= SECONDS; t += WINDOW) {
    await Bun.sleep(start.at + t * 1000 - performance.now());
    if (failure) throw failure;
    const now = await sample();
    const jobs = now.done - prev.done;
    if (!(jobs > 0)) throw new Error(`no job completed in the window ending at ${t} s (or /metrics lacks spool_jobs_ended_total)`);
    const w: Window = {
      endS: t,
      done: now.done - start.done,
      jobsPerS: jobs / ((now.at - prev.at) / 1000),
      serverCpuUs: ((now.server - prev.server) * 1e6) / jobs,
      workersCpuUs: ((now.workers - prev.workers) * 1e6) / jobs,
      serverRss: rssMiB(server.proc.pid),
      serverHeap: now.heap,
      workerRss: workers.reduce((sum, p) => sum + rssMiB(p.pid), 0) / WORKERS,
      queued: now.queued,
    };
    windows.push(w);
    console.log(
      `  ${t} s: ${w.jobsPerS.toFixed(0)} jobs/s, server ${w.serverCpuUs.toFixed(0)} µs/job, workers ${w.workersCpuUs.toFixed(0)} µs/job`,
    );
    prev = now;
  }
  stop.abort();
  await Promise.all(loops);

  console.log(
    `\n### Soak on the ${ON_REDIS ? "Redis" : "embedded"} store: ${WORKERS} worker processes (spool worker, echo handler), ${SUBMITTERS} submit loops, ~${QUEUED} jobs queued throughout\n`,
  );
  const head = [
    "window ends s",
    "jobs done",
    "jobs/s",
    "server CPU µs/job",
    "workers CPU µs/job",
    "server RSS MiB",
    "server JS heap MiB",
    "worker RSS MiB",
    "queued",
  ];
  printTable(
    head,
    "rrrrrrrrr",
    windows.map((w) => [
      String(w.endS),
      String(w.done),
      w.jobsPerS.toFixed(0),
      w.serverCpuUs.toFixed(0),
      w.workersCpuUs.toFixed(0),
      w.serverRss.toFixed(1),
      w.serverHeap.toFixed(1),
      w.workerRss.toFixed(1),
      String(w.queued),
    ]),
  );
  const first = windows[0]!;
  const last = windows.at(-1)!;
  const x = (a: number, b: number) => `×${(a / b).toFixed(2)}`;
  console.log(
    `\nlast window against the first: jobs/s ${x(last.jobsPerS, first.jobsPerS)}, server CPU per job ${x(last.serverCpuUs, first.serverCpuUs)}, workers CPU per job ${x(last.workersCpuUs, first.workersCpuUs)}`,
  );
  console.log(`machine: ${info}`);
  console.log(
    "CPU is user+system per window from /proc (10 ms ticks); RSS from /proc; JS heap from the server's /metrics (nodejs_heap_size_used_bytes).",
  );
}

await runBench("bench-soak", main, cleanup, rig.outputs);
