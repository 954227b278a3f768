#!/usr/bin/env bun
/**
 * Cold start benchmark: from zero workers to the first /runsync answer, through the real scaler.
 *
 * Builds handlers/examples/echo.ts with `spool build`, then starts `spool serve` in a process of
 * its own with one endpoint `cold` (workersMin 0, workersMax 1, idleTimeout 1 s, QUEUE_DELAY)
 * whose scaler starts local worker processes. Per try it waits, polling GET /v2/cold/health,
 * until the scaler has stopped the idle worker (idle + running + initializing == 0), then times
 *   - cold: POST /v2/cold/runsync {"input":{"try":i}} until it answers COMPLETED;
 *   - warm: the same again at once, the worker still up.
 * Variants (each on a fresh server and data dir, one after the other, never overlapping):
 *   - the built binary, scaleIntervalMs 50 (so the scaler's cadence hardly counts);
 *   - the built binary, scaleIntervalMs 1000 (the default), to show what the cadence costs;
 *   - the handler as a source file (`bun runtime/cli.ts worker echo.ts`), scaleIntervalMs 50.
 * Each variant starts with one unrecorded cold try (the first start after the server came up).
 * After zero workers, each try pauses a random 0..scaleIntervalMs before its request, so that it
 * lands at a random point of the scaler's cycle rather than just after the tick that stopped the
 * previous worker (which would always be the worst case: nearly a whole interval to wait).
 * "request -> spawn" is when the server's "started worker" log line reached this process.
 *
 *   bun scripts/bench-cold-start.ts [--tries 20] [--other-tries 10]
 *
 * It prints figures; it asserts only that every job completed, that each cold try started exactly
 * one worker, and that no process of a server's group was left behind.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { HealthResponse } from "../runtime/protocol/job-response.ts";

const ROOT = resolve(import.meta.dir, "..");
const ENDPOINT = "cold";
const IDLE_TIMEOUT_S = 1;
const FAST_INTERVAL_MS = 50;
const DEFAULT_INTERVAL_MS = 1000;
/** How often /health is polled while waiting for zero workers. */
const HEALTH_POLL_MS = 20;
/** A try whose worker is not gone, or whose job is not done, after this long fails the benchmark. */
const TRY_TIMEOUT_MS = 15_000;
/** After SIGTERM, how long the server (which stops its workers first) may take before SIGKILL. */
const KILL_AFTER_MS = 5_000;
/** The comparison variants stop early past this many seconds, to keep the total near 90 s. */
const SOFT_BUDGET_S = 80;

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    tries: { type: "string", default: "20" },
    "other-tries": { type: "string", default: "10" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) {
  console.log("usage: bun scripts/bench-cold-start.ts [--tries 20] [--other-tries 10]");
  process.exit(0);
}
function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`bench-cold-start: --${name} must be a positive integer, got ${value}`);
    process.exit(2);
  }
  return n;
}
const TRIES = positiveInt("tries", flags.tries);
const OTHER_TRIES = positiveInt("other-tries", flags["other-tries"]);

// ---------------------------------------------------------------------------------------------
// Servers (each the leader of its own process group, which holds its workers too), cleaned up
// on every exit path

interface Server {
  label: string;
  url: string;
  key: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** performance.now() of every "started worker" log line, as it reached this process. */
  workerStarts: number[];
  /** Log lines at warn or error level (a worker crash, a failed tick). */
  problems: string[];
  /** What the server and its workers wrote so far (for error reports). */
  output: () => string;
}

const tmpRoot = mkdtempSync(join(tmpdir(), "spool-bench-cold-"));
const running = new Set<Server>();
let forcedKills = 0;

const exitedWithin = (proc: Bun.Subprocess, ms: number) =>
  Promise.race([proc.exited.then(() => true), Bun.sleep(ms).then(() => false)]);

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {}
}

/** Reads a pipe to its end, calling `onText` per piece (so the server never blocks on a full pipe). */
async function drain(stream: ReadableStream<Uint8Array>, onText: (s: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

async function startServer(label: string, name: string, handler: string, scaleIntervalMs: number): Promise<Server> {
  const dataDir = join(tmpRoot, name);
  mkdirSync(dataDir);
  const configPath = join(tmpRoot, `${name}.toml`);
  writeFileSync(
    configPath,
    `[server]\nhost = "127.0.0.1"\nscaleIntervalMs = ${scaleIntervalMs}\n\n` +
      `[endpoints.${ENDPOINT}]\nhandler = ${JSON.stringify(handler)}\nworkersMin = 0\nworkersMax = 1\n` +
      `idleTimeout = ${IDLE_TIMEOUT_S}\nscalerType = "QUEUE_DELAY"\n`,
  );
  // detached: the server leads a new process group, and the workers it spawns join it.
  const proc = Bun.spawn([process.execPath, "runtime/cli.ts", "serve", "--port", "0", "--data", dataDir, "--config", configPath], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  let out = "";
  let err = "";
  let partial = "";
  const server: Server = {
    label,
    url: "",
    key: "",
    proc,
    workerStarts: [],
    problems: [],
    output: () => `--- stdout\n${out}--- stderr (tail)\n${err}`,
  };
  running.add(server);

  const ready = Promise.withResolvers<void>();
  const check = () => {
    const key = /created one named "default"[^\n]*\n\s*\n?\s*(\S+)\s*\n/.exec(out)?.[1];
    const url = /Spool listening on (http:\/\/\S+)/.exec(out)?.[1];
    if (key && url) {
      server.key = key;
      server.url = url;
      ready.resolve();
    }
  };
  void drain(proc.stdout, (s) => {
    out += s;
    if (!server.url) check();
  });
  void drain(proc.stderr, (s) => {
    const at = performance.now();
    err += s;
    if (err.length > 100_000) err = err.slice(-50_000);
    const lines = (partial + s).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.includes('"msg":"started worker"')) server.workerStarts.push(at);
      if (/"level":"(warn|error)"/.test(line)) server.problems.push(line);
    }
  });
  void proc.exited.then((code) => ready.reject(new Error(`server exited with ${code} before it was ready`)));
  const timer = setTimeout(() => ready.reject(new Error("server not ready after 15 s")), 15_000);
  try {
    await ready.promise;
  } catch (e) {
    throw new Error(`${label}: ${(e as Error).message}\n${server.output()}`);
  } finally {
    clearTimeout(timer);
  }
  return server;
}

/**
 * SIGTERM to the server (it stops its workers, waits for them, then exits), SIGKILL to its whole
 * group after KILL_AFTER_MS; then waits until no process of the group is left.
 */
async function stopServer(server: Server): Promise<void> {
  running.delete(server);
  const pgid = server.proc.pid;
  if (server.proc.exitCode === null && server.proc.signalCode === null) {
    server.proc.kill("SIGTERM");
    if (!(await exitedWithin(server.proc, KILL_AFTER_MS))) {
      forcedKills++;
      killGroup(pgid, "SIGKILL");
      await server.proc.exited;
    }
  }
  const deadline = performance.now() + KILL_AFTER_MS;
  while (groupAlive(pgid)) {
    if (performance.now() > deadline) {
      forcedKills++;
      killGroup(pgid, "SIGKILL");
      await Bun.sleep(100);
      if (groupAlive(pgid)) throw new Error(`${server.label}: process group ${pgid} survived SIGKILL`);
      break;
    }
    await Bun.sleep(20);
  }
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await Promise.all([...running].map((s) => stopServer(s).catch((e) => console.error(String(e)))));
  rmSync(tmpRoot, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Client

const headers = (server: Server) => ({ authorization: `Bearer ${server.key}`, "content-type": "application/json" });

async function health(server: Server): Promise<HealthResponse> {
  const res = await fetch(`${server.url}/v2/${ENDPOINT}/health`, { headers: headers(server) });
  if (!res.ok) throw new Error(`health: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as HealthResponse;
}

const workerCount = (h: HealthResponse) => h.workers.idle + h.workers.running + h.workers.initializing;

/** Polls /health until the endpoint has no worker at all; returns how long that took (ms). */
async function untilNoWorkers(server: Server): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const h = await health(server);
    if (workerCount(h) === 0) return performance.now() - t0;
    if (performance.now() - t0 > TRY_TIMEOUT_MS) {
      throw new Error(`${server.label}: still ${JSON.stringify(h.workers)} workers after ${TRY_TIMEOUT_MS / 1000} s`);
    }
    await Bun.sleep(HEALTH_POLL_MS);
  }
}

/** POST /runsync until COMPLETED (following up with /status-sync should runsync come back early). */
async function runsync(server: Server, input: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${server.url}/v2/${ENDPOINT}/runsync`, {
    method: "POST",
    headers: headers(server),
    body: JSON.stringify({ input }),
    signal: AbortSignal.timeout(TRY_TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`runsync: HTTP ${res.status} ${await res.text()}`);
  let body = (await res.json()) as { id: string; status: string; output?: unknown };
  while (body.status === "IN_QUEUE" || body.status === "IN_PROGRESS") {
    const r = await fetch(`${server.url}/v2/${ENDPOINT}/status-sync/${body.id}`, {
      headers: headers(server),
      signal: AbortSignal.timeout(TRY_TIMEOUT_MS),
    });
    if (!r.ok) throw new Error(`status-sync: HTTP ${r.status} ${await r.text()}`);
    body = (await r.json()) as typeof body;
  }
  if (body.status !== "COMPLETED") throw new Error(`runsync: job ${body.id} ended ${body.status}: ${JSON.stringify(body)}`);
  if (JSON.stringify(body.output) !== JSON.stringify(input)) {
    throw new Error(`runsync: echo returned ${JSON.stringify(body.output)} for ${JSON.stringify(input)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Variants

interface Variant {
  label: string;
  name: string;
  handler: string;
  scaleIntervalMs: number;
  tries: number;
  first?: number;
  cold: number[];
  /** Request sent -> the scaler's "started worker" line. */
  toSpawn: number[];
  /** That line -> the answer: the worker's start, its job-take, the job. */
  spawnToAnswer: number[];
  warm: number[];
  /** Last answer -> health shows zero workers (idleTimeout + the scaler's cadence + the worker's exit). */
  scaleDown: number[];
}

async function runVariant(v: Variant, t0: number, budgeted: boolean): Promise<void> {
  const server = await startServer(v.label, v.name, v.handler, v.scaleIntervalMs);
  try {
    for (let i = 0; i <= v.tries; i++) {
      const record = i > 0; // try 0: the first start after the server came up, reported apart
      const down = await untilNoWorkers(server);
      if (record) v.scaleDown.push(down); // since the previous try's warm answer
      // Zero workers shows up just after the scaler tick that stopped the last one, so a request
      // sent now would always wait nearly a whole interval for the next tick (the worst case).
      // A random pause puts it at a uniformly random point of the scaler's cycle, as a client's.
      await Bun.sleep(Math.random() * v.scaleIntervalMs);
      const startsBefore = server.workerStarts.length;
      const tc = performance.now();
      await runsync(server, { try: i });
      const cold = performance.now() - tc;
      if (server.workerStarts.length !== startsBefore + 1) {
        throw new Error(`${v.label}: try ${i} started ${server.workerStarts.length - startsBefore} workers, expected 1`);
      }
      const spawnAt = server.workerStarts[startsBefore]!;
      const tw = performance.now();
      await runsync(server, { try: i, warm: true });
      const warm = performance.now() - tw;
      if (server.workerStarts.length !== startsBefore + 1) throw new Error(`${v.label}: try ${i}: the warm job started a worker`);
      if (!record) {
        v.first = cold;
        continue;
      }
      v.cold.push(cold);
      v.toSpawn.push(spawnAt - tc);
      v.spawnToAnswer.push(tc + cold - spawnAt);
      v.warm.push(warm);
      if (budgeted && (performance.now() - t0) / 1000 > SOFT_BUDGET_S && i < v.tries) {
        console.log(`note: ${v.label}: stopping after ${i} tries to stay near 90 s`);
        break;
      }
    }
    if (server.problems.length) throw new Error(`${v.label}: the server logged problems:\n${server.problems.join("\n")}`);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${server.output()}`);
  } finally {
    await stopServer(server);
  }
}

// ---------------------------------------------------------------------------------------------
// Main

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
  return { n: s.length, p50: at(0.5), p95: at(0.95), min: s[0]!, max: s[s.length - 1]! };
}

const f1 = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "n/a" : n.toFixed(1));

function machineRows(): [string, string][] {
  let nproc = String(navigator.hardwareConcurrency);
  try {
    const p = Bun.spawnSync(["nproc"]);
    if (p.exitCode === 0) nproc = p.stdout.toString().trim();
  } catch {}
  return [
    ["nproc", nproc],
    ["CPU", cpus()[0]?.model ?? "unknown"],
    ["bun", `${Bun.version} (${Bun.revision.slice(0, 9)})`],
    ["platform", `${process.platform}-${process.arch}`],
  ];
}

async function main(): Promise<void> {
  const t0 = performance.now();
  console.log(`spool cold start benchmark: zero workers -> first POST /v2/${ENDPOINT}/runsync answer (COMPLETED)`);
  console.log(
    `endpoint: workersMin 0, workersMax 1, idleTimeout ${IDLE_TIMEOUT_S} s, QUEUE_DELAY; ` +
      `scaleIntervalMs ${FAST_INTERVAL_MS} (and the default ${DEFAULT_INTERVAL_MS} for comparison)\n`,
  );

  const binDir = join(tmpRoot, "bin");
  mkdirSync(binDir);
  const binary = join(binDir, "echo-worker");
  const tb = performance.now();
  const build = Bun.spawn([process.execPath, "runtime/cli.ts", "build", "handlers/examples/echo.ts", "--outfile", binary], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, bout, berr] = await Promise.all([build.exited, new Response(build.stdout).text(), new Response(build.stderr).text()]);
  const buildS = (performance.now() - tb) / 1000;
  if (code !== 0 || !existsSync(binary)) throw new Error(`spool build failed (exit ${code})\n${bout}${berr}`);
  const sizeMB = statSync(binary).size / 1e6;
  console.log(`build: ${binary} ${f1(sizeMB)} MB in ${f1(buildS)} s\n`);

  const variant = (label: string, name: string, handler: string, scaleIntervalMs: number, tries: number): Variant => ({
    label,
    name,
    handler,
    scaleIntervalMs,
    tries,
    cold: [],
    toSpawn: [],
    spawnToAnswer: [],
    warm: [],
    scaleDown: [],
  });
  const variants = [
    variant("binary", "binary-fast", binary, FAST_INTERVAL_MS, TRIES),
    variant("binary", "binary-default", binary, DEFAULT_INTERVAL_MS, OTHER_TRIES),
    variant("source (bun cli.ts worker echo.ts)", "source-fast", join(ROOT, "handlers/examples/echo.ts"), FAST_INTERVAL_MS, OTHER_TRIES),
  ];
  for (const [i, v] of variants.entries()) {
    const tv = performance.now();
    await runVariant(v, t0, i > 0);
    const c = stats(v.cold);
    console.log(
      `  ${v.label}, scaleIntervalMs ${v.scaleIntervalMs}: cold p50 ${f1(c.p50)} ms, p95 ${f1(c.p95)} ms ` +
        `(${c.n} tries, ${f1((performance.now() - tv) / 1000)} s)`,
    );
  }
  console.log("");

  console.log("| handler | scaleIntervalMs | n | cold p50 ms | cold p95 ms | cold min ms | cold max ms | warm p50 ms | warm p95 ms | first cold ms |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const v of variants) {
    const c = stats(v.cold);
    const w = stats(v.warm);
    console.log(
      `| ${v.label} | ${v.scaleIntervalMs} | ${c.n} | **${f1(c.p50)}** | ${f1(c.p95)} | ${f1(c.min)} | ${f1(c.max)} | ${f1(w.p50)} | ${f1(w.p95)} | ${f1(v.first)} |`,
    );
  }
  console.log("");
  console.log("| cold try, split (p50 / max ms) | scaleIntervalMs | request -> scaler spawns worker | spawn -> answer | last answer -> zero workers |");
  console.log("|---|---:|---:|---:|---:|");
  for (const v of variants) {
    const a = stats(v.toSpawn);
    const b = stats(v.spawnToAnswer);
    const d = stats(v.scaleDown);
    console.log(`| ${v.label} | ${v.scaleIntervalMs} | ${f1(a.p50)} / ${f1(a.max)} | ${f1(b.p50)} / ${f1(b.max)} | ${f1(d.p50)} / ${f1(d.max)} |`);
  }
  console.log("");
  console.log("| machine | |");
  console.log("|---|---|");
  for (const [k, val] of machineRows()) console.log(`| ${k} | ${val} |`);
  console.log("");
  console.log(`binary: ${f1(sizeMB)} MB, built in ${f1(buildS)} s. "first cold" is each server's first try (unrecorded in n).`);
  console.log(`warm: a second runsync at once after each cold one, the worker still up. "request -> scaler spawns worker"`);
  console.log(`is when the server's "started worker" log line reached this process; "last answer -> zero workers" is the`);
  console.log(`wait before a try (idleTimeout ${IDLE_TIMEOUT_S} s + the scaler's cadence + the worker's exit), polled every ${HEALTH_POLL_MS} ms;`);
  console.log(`then a random 0..scaleIntervalMs pause, so each cold request lands at a random point of the scaler's cycle.`);
  console.log(`one server at a time, in its own process group; SIGKILLs needed: ${forcedKills}; total ${f1((performance.now() - t0) / 1000)} s`);
}

try {
  await main();
} catch (e) {
  console.error(`bench-cold-start failed: ${(e as Error).stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
