#!/usr/bin/env bun
/**
 * What a request costs the queue server's own code, in-process: Request objects go straight to
 * the app's fetch, as Bun.serve hands them over, so no socket or HTTP parsing is counted. CPU
 * per request for a 401, an authorized 404 (status of a missing job) and each step of a job
 * (run, job-take, job-done, one at a time on the embedded store, so each write commits alone),
 * beside a bare Hono app that parses a small JSON POST and answers JSON: the framework's own
 * floor, in the same run. Rows alternate within each round; medians of the rounds.
 *
 * `--baseline DIR` builds the same app from another checkout too (in this process, on a store of
 * its own) and runs every row on both, alternating which goes first: this one's CPU against the
 * baseline's, round by round.
 *
 *   bun scripts/bench/requests.ts [--requests 20000] [--rounds 3] [--baseline DIR]
 */
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup, runBench } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { REPO_ROOT } from "./harness/spool-process.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const USAGE = "usage: bun scripts/bench/requests.ts [--requests 20000] [--rounds 3] [--baseline DIR (another checkout, same rows)]";
const cli = benchCli("bench-requests", USAGE);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    requests: { type: "string", default: "20000" },
    rounds: { type: "string", default: "3" },
    baseline: { type: "string" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
const N = cli.int("requests", flags.requests!);
const ROUNDS = cli.int("rounds", flags.rounds!);
const BASELINE = flags.baseline === undefined ? undefined : resolve(flags.baseline);
if (BASELINE !== undefined && !existsSync(join(BASELINE, "runtime/server/app.ts")))
  cli.fail(`--baseline ${flags.baseline} has no runtime/server/app.ts (give the root of another checkout)`);
/** Untimed calls of each row first: JavaScriptCore optimises a function after about a thousand calls. */
const WARM = 2_000;

const dir = makeTempDir("spool-bench-requests-");
const cleanup = exitCleanup(async () => removeDir(dir));
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** Where the checkout at `root` keeps its SQLite store (it moved into store/sqlite/). */
const sqliteStorePath = (root: string) =>
  existsSync(join(root, "runtime/server/store/sqlite/sqlite-store.ts"))
    ? "runtime/server/store/sqlite/sqlite-store.ts"
    : "runtime/server/store/sqlite-store.ts";

/** The server's app of the checkout at `root` on a fresh embedded store, with one full key; nothing listens. */
async function spoolApp(root: string, name: string) {
  const from = async <T>(path: string): Promise<T> => import(join(root, path)) as Promise<T>;
  const { systemClock } = await from<typeof import("../../runtime/clock.ts")>("runtime/clock.ts");
  const { parseConfig } = await from<typeof import("../../runtime/config/config.ts")>("runtime/config/config.ts");
  const { silentLog } = await from<typeof import("../../runtime/log.ts")>("runtime/log.ts");
  const { createApp } = await from<typeof import("../../runtime/server/app.ts")>("runtime/server/app.ts");
  const { LocalFileStore } = await from<typeof import("../../runtime/server/files/file-store.ts")>("runtime/server/files/file-store.ts");
  const { JobEvents } = await from<typeof import("../../runtime/server/jobs/job-events.ts")>("runtime/server/jobs/job-events.ts");
  const { createKey } = await from<typeof import("../../runtime/server/keys/api-keys.ts")>("runtime/server/keys/api-keys.ts");
  const { EndpointStatsRecorder } = await from<typeof import("../../runtime/server/metrics/endpoint-stats.ts")>(
    "runtime/server/metrics/endpoint-stats.ts",
  );
  const { ServerMetrics } = await from<typeof import("../../runtime/server/metrics/server-metrics.ts")>(
    "runtime/server/metrics/server-metrics.ts",
  );
  const { SqliteStore } = await from<typeof import("../../runtime/server/store/sqlite/sqlite-store.ts")>(sqliteStorePath(root));
  const data = join(dir, name);
  mkdirSync(data);
  const many = { requests: 1e9, concurrent: 10_000 };
  const config = parseConfig({
    server: { port: 0, host: "127.0.0.1", data, takeWaitMs: 0, sweepIntervalMs: 3_600_000 },
    endpoints: { echo: { workersMax: 1_000, rateLimits: { run: many, runsync: many, status: many } } },
  });
  const store = SqliteStore.open(data, { retention: { syncMs: 60_000, asyncMs: 1_800_000 } });
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
  return { fetch: (req: Request) => app.fetch(req), key, close };
}
type SpoolApp = Awaited<ReturnType<typeof spoolApp>>;

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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const BARE = "bare Hono: small JSON POST answered with JSON (reference)";
const STEPS = ["POST /run", "GET /job-take (one job queued)", "POST /job-done"];
const JOB = "a job: run + job-take + job-done";

/** One round of every row on one app: CPU µs per request (per job for the last row). */
async function round(app: SpoolApp, bare: Hono): Promise<Map<string, number>> {
  const auth = `Bearer ${app.key}`;
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
    [BARE]: async () => {
      const res = await bare.fetch(request("/echo", auth, { input: { n: 1 } }));
      await res.text();
    },
    "401: unknown key": () => answer(request("/v2/echo/status/nope", "Bearer nope"), 401),
    "authorized 404: GET /status of a missing job": () => answer(request("/v2/echo/status/nope", auth), 404),
  };
  const out = new Map<string, number>();
  for (const [row, fn] of Object.entries(single)) {
    for (let i = 0; i < WARM; i++) await fn();
    const c0 = cpuUs();
    for (let i = 0; i < N; i++) await fn();
    out.set(row, (cpuUs() - c0) / N);
  }
  const sums = [0, 0, 0];
  for (let i = 0; i < WARM / 2; i++) await job([0, 0, 0]);
  for (let i = 0; i < N / 2; i++) await job(sums);
  STEPS.forEach((row, k) => out.set(row, sums[k]! / (N / 2)));
  out.set(JOB, (sums[0]! + sums[1]! + sums[2]!) / (N / 2));
  return out;
}

async function main(): Promise<void> {
  const info = machineLine(machine(), { ram: true, load: true });
  console.log(
    `spool request benchmark: ${N} requests per row after ${WARM} untimed, ${ROUNDS} rounds (median), in-process${BASELINE ? `, beside ${BASELINE}` : ""}`,
  );
  const apps = [await spoolApp(REPO_ROOT, "this"), ...(BASELINE ? [await spoolApp(BASELINE, "baseline")] : [])];
  const bare = new Hono();
  bare.post("/echo", async (c) => c.json({ got: await c.req.json() }));

  const runs = apps.map(() => new Map<string, number[]>());
  for (let r = 1; r <= ROUNDS; r++) {
    // With a baseline, even rounds run it first.
    const order = r % 2 ? apps.map((_, i) => i) : apps.map((_, i) => i).reverse();
    for (const i of order) {
      for (const [row, us] of await round(apps[i]!, bare)) runs[i]!.set(row, [...(runs[i]!.get(row) ?? []), us]);
    }
    const line = (m: Map<string, number[]>) => [...m].map(([row, us]) => `${row.split(":")[0]} ${us.at(-1)!.toFixed(1)}`).join(", ");
    console.log(`  round ${r}: ${line(runs[0]!)}${BASELINE ? `\n    baseline: ${line(runs[1]!)}` : ""}`);
  }
  for (const app of apps) await app.close();

  const [mine, base] = runs as [Map<string, number[]>, Map<string, number[]> | undefined];
  const floor = median(mine.get(BARE)!);
  console.log(`\n### CPU per request in the server's own code, in-process (no sockets), embedded store\n`);
  const head = [
    "request",
    "CPU µs (median)",
    "rounds",
    "× bare Hono",
    ...(base ? ["baseline CPU µs (median)", "this ÷ baseline (median of rounds)", "per round"] : []),
  ];
  printTable(
    head,
    base ? "lrlrrrl" : "lrlr",
    [...mine].map(([row, us]) => {
      const cells = [row, `**${median(us).toFixed(1)}**`, us.map((u) => u.toFixed(1)).join(", "), (median(us) / floor).toFixed(2)];
      if (!base || row === BARE) return base ? [...cells, "", "", ""] : cells;
      const b = base.get(row)!;
      const ratios = us.map((u, i) => u / b[i]!);
      return [...cells, median(b).toFixed(1), `**${median(ratios).toFixed(2)}**`, ratios.map((x) => x.toFixed(2)).join(", ")];
    }),
  );
  console.log(`\nmachine: ${info}`);
  console.log(
    "CPU is this process's user+system time, making the Request objects included (the same in every row); job steps one at a time, each write its own commit.",
  );
}

await runBench("bench-requests", main, cleanup);
