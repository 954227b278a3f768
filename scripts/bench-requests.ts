#!/usr/bin/env bun
/**
 * What a request costs the queue server's own code, in-process: Request objects go straight to
 * the app's fetch, as Bun.serve hands them over, so no socket or HTTP parsing is counted. CPU
 * per request for a 401, an authorized 404 (status of a missing job) and each step of a job
 * (run, job-take, job-done, one at a time on the embedded store, so each write commits alone),
 * beside a bare Hono app that parses a small JSON POST and answers JSON: the framework's own
 * floor, in the same run. Rows alternate within each round; medians of the rounds.
 *
 *   bun scripts/bench-requests.ts [--requests 20000] [--rounds 3]
 */
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { systemClock } from "../runtime/clock.ts";
import { parseConfig } from "../runtime/config/config.ts";
import { silentLog } from "../runtime/log.ts";
import { createApp } from "../runtime/server/app.ts";
import { LocalFileStore } from "../runtime/server/files/file-store.ts";
import { JobEvents } from "../runtime/server/jobs/job-events.ts";
import { createKey } from "../runtime/server/keys/api-keys.ts";
import { EndpointStatsRecorder } from "../runtime/server/metrics/endpoint-stats.ts";
import { ServerMetrics } from "../runtime/server/metrics/server-metrics.ts";
import { SqliteStore } from "../runtime/server/store/sqlite-store.ts";
import { benchCli } from "./bench/cli.ts";
import { exitCleanup, runBench } from "./bench/exit-cleanup.ts";
import { machine, machineLine } from "./bench/machine.ts";
import { printTable } from "./bench/table.ts";
import { makeTempDir, removeDir } from "./bench/temp-dir.ts";

const USAGE = "usage: bun scripts/bench-requests.ts [--requests 20000] [--rounds 3]";
const cli = benchCli("bench-requests", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: { requests: { type: "string", default: "20000" }, rounds: { type: "string", default: "3" }, help: { type: "boolean" } },
});
if (flags.help) cli.help();
const N = cli.int("requests", flags.requests!);
const ROUNDS = cli.int("rounds", flags.rounds!);
/** Untimed calls of each row first: JavaScriptCore optimises a function after about a thousand calls. */
const WARM = 2_000;

const dir = makeTempDir("spool-bench-requests-");
const cleanup = exitCleanup(async () => removeDir(dir));
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** The server's app on a fresh embedded store, with one full key; nothing listens. */
async function spoolApp() {
  const many = { requests: 1e9, concurrent: 10_000 };
  const config = parseConfig({
    server: { port: 0, host: "127.0.0.1", data: dir, takeWaitMs: 0, sweepIntervalMs: 3_600_000 },
    endpoints: { echo: { workersMax: 1_000, rateLimits: { run: many, runsync: many, status: many } } },
  });
  const store = SqliteStore.open(dir, { retention: { syncMs: 60_000, asyncMs: 1_800_000 } });
  const { key } = await createKey(store, "bench", Date.now());
  const jobEvents = new JobEvents((err) => {
    throw err;
  });
  const stats = new EndpointStatsRecorder(jobEvents, systemClock);
  const metrics = new ServerMetrics({ store, config, clock: systemClock, jobEvents });
  const files = new LocalFileStore(config.server.data, config.server.fileUrlTtlMs);
  const app = createApp({ store, config, clock: systemClock, log: silentLog, jobEvents, stats, metrics, files, localFiles: files });
  const close = async () => {
    stats.close();
    metrics.close();
    await store.close();
  };
  return { app, key, close };
}

/** A request as Bun.serve hands one over: a body comes with its Content-Length, as HTTP clients send it. */
const request = (path: string, auth: string, body?: unknown) => {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const length: Record<string, string> = text === undefined ? {} : { "content-length": String(Buffer.byteLength(text)) };
  return new Request(`http://127.0.0.1${path}`, {
    method: text === undefined ? "GET" : "POST",
    headers: { authorization: auth, "content-type": "application/json", ...length },
    body: text,
  });
};

async function main(): Promise<void> {
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(`spool request benchmark: ${N} requests per row after ${WARM} untimed, ${ROUNDS} rounds (median), in-process`);
  const { app, key, close } = await spoolApp();
  const bare = new Hono();
  bare.post("/echo", async (c) => c.json({ got: await c.req.json() }));
  const auth = `Bearer ${key}`;

  const answer = async (req: Request, status: number): Promise<any> => {
    const res = await app.fetch(req);
    const text = await res.text();
    if (res.status !== status) throw new Error(`${req.method} ${new URL(req.url).pathname} answered ${res.status}, not ${status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  /** One job through run, job-take and job-done, adding each step's CPU to `into`. */
  const job = async (into: number[]) => {
    let c = cpuUs();
    const { id } = await answer(request("/v2/echo/run", auth, { input: { n: 1 } }), 200);
    into[0]! += cpuUs() - c;
    c = cpuUs();
    await answer(request("/v2/echo/job-take/w1", auth), 200);
    into[1]! += cpuUs() - c;
    c = cpuUs();
    await answer(request(`/v2/echo/job-done/w1/${id}?gpu=bench&isStream=false`, auth, { output: { ok: true } }), 200);
    into[2]! += cpuUs() - c;
  };
  const single: Record<string, () => Promise<unknown>> = {
    "bare Hono: small JSON POST answered with JSON (reference)": async () => {
      const res = await bare.fetch(request("/echo", auth, { input: { n: 1 } }));
      await res.text();
    },
    "401: unknown key": () => answer(request("/v2/echo/status/nope", "Bearer nope"), 401),
    "authorized 404: GET /status of a missing job": () => answer(request("/v2/echo/status/nope", auth), 404),
  };
  const steps = ["POST /run", "GET /job-take (one job queued)", "POST /job-done"];

  const runs = new Map<string, number[]>();
  const add = (row: string, us: number) => runs.set(row, [...(runs.get(row) ?? []), us]);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [row, fn] of Object.entries(single)) {
      for (let i = 0; i < WARM; i++) await fn();
      const c0 = cpuUs();
      for (let i = 0; i < N; i++) await fn();
      add(row, (cpuUs() - c0) / N);
    }
    const sums = [0, 0, 0];
    for (let i = 0; i < WARM / 2; i++) await job([0, 0, 0]);
    for (let i = 0; i < N / 2; i++) await job(sums);
    steps.forEach((row, k) => add(row, sums[k]! / (N / 2)));
    add("a job: run + job-take + job-done", (sums[0]! + sums[1]! + sums[2]!) / (N / 2));
    console.log(`  round ${round}: ${[...runs].map(([row, us]) => `${row.split(":")[0]} ${us.at(-1)!.toFixed(1)}`).join(", ")}`);
  }
  await close();

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const floor = median(runs.get(Object.keys(single)[0]!)!);
  console.log(`\n### CPU per request in the server's own code, in-process (no sockets), embedded store\n`);
  printTable(
    ["request", "CPU µs (median)", "rounds", "× bare Hono"],
    "lrlr",
    [...runs].map(([row, us]) => [row, `**${median(us).toFixed(1)}**`, us.map((u) => u.toFixed(1)).join(", "), (median(us) / floor).toFixed(2)]),
  );
  console.log(`\nmachine: ${info}`);
  console.log("CPU is this process's user+system time, making the Request objects included (the same in every row); job steps one at a time, each write its own commit.");
}

await runBench("bench-requests", main, cleanup);
