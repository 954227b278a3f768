import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HealthResponse } from "../../../runtime/protocol/job-response.ts";
import { stopGroup } from "./processes.ts";
import { bearer, getHealth } from "./spool-http.ts";
import { startSpool, type SpoolProcess } from "./spool-process.ts";

export const ENDPOINT = "cold";
export const IDLE_TIMEOUT_S = 1;
/** How often /health is polled while waiting for zero workers. */
export const HEALTH_POLL_MS = 20;
/** A try whose worker is not gone, or whose job is not done, after this long fails the benchmark. */
const TRY_TIMEOUT_MS = 15_000;
/** After SIGTERM, how long the server (which stops its workers first) may take before SIGKILL. */
const KILL_AFTER_MS = 5_000;
/** The comparison variants stop early past this many seconds, to keep the total near 90 s. */
const SOFT_BUDGET_S = 80;

/** One way of running the handler, and its figures (ms) once run. */
export interface Variant {
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

/** A server for the cold-start endpoint, leading a process group that holds its workers too. */
interface ColdServer extends SpoolProcess {
  label: string;
  /** performance.now() of every "started worker" log line, as it reached this process. */
  workerStarts: number[];
  /** Log lines at warn or error level (a worker crash, a failed tick). */
  problems: string[];
}

/** The servers of the cold-start benchmark, one at a time, in `tmpRoot`; stopped on any exit path. */
export function coldServers(tmpRoot: string) {
  const running = new Set<ColdServer>();
  let forcedKills = 0;

  async function start(v: Variant): Promise<ColdServer> {
    const dataDir = join(tmpRoot, v.name);
    mkdirSync(dataDir);
    const configPath = join(tmpRoot, `${v.name}.toml`);
    writeFileSync(
      configPath,
      `[server]\nhost = "127.0.0.1"\nscaleIntervalMs = ${v.scaleIntervalMs}\n\n` +
        `[endpoints.${ENDPOINT}]\nhandler = ${JSON.stringify(v.handler)}\nworkersMin = 0\nworkersMax = 1\n` +
        `idleTimeout = ${IDLE_TIMEOUT_S}\nscalerType = "QUEUE_DELAY"\n`,
    );
    const workerStarts: number[] = [];
    const problems: string[] = [];
    // detached: the server leads a new process group, and the workers it spawns join it.
    const server = await startSpool({
      name: v.label,
      dataDir,
      configPath,
      detached: true,
      onStderrLine: (line, at) => {
        if (line.includes('"msg":"started worker"')) workerStarts.push(at);
        if (/"level":"(warn|error)"/.test(line)) problems.push(line);
      },
    });
    const cold: ColdServer = Object.assign(server, { label: v.label, workerStarts, problems });
    running.add(cold);
    return cold;
  }

  /**
   * SIGTERM to the server (it stops its workers, waits for them, then exits), SIGKILL to its whole
   * group after KILL_AFTER_MS; then waits until no process of the group is left.
   */
  async function stop(server: ColdServer): Promise<void> {
    running.delete(server);
    const r = await stopGroup(server.proc, { killAfterMs: KILL_AFTER_MS, pollMs: 20, afterKillMs: 100, label: server.label });
    forcedKills += r.forcedKills;
  }

  return {
    start,
    stop,
    /** Stops every server still running, reporting (not throwing) what fails. */
    stopAll: () => Promise.all([...running].map((s) => stop(s).catch((e) => console.error(String(e))))),
    /** SIGKILLs that stopping servers has needed so far. */
    forcedKills: () => forcedKills,
  };
}
export type ColdServers = ReturnType<typeof coldServers>;

const workerCount = (h: HealthResponse) => h.workers.idle + h.workers.running + h.workers.initializing;

/** Polls /health until the endpoint has no worker at all; returns how long that took (ms). */
async function untilNoWorkers(server: ColdServer): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const h = await getHealth(server, ENDPOINT);
    if (workerCount(h) === 0) return performance.now() - t0;
    if (performance.now() - t0 > TRY_TIMEOUT_MS) {
      throw new Error(`${server.label}: still ${JSON.stringify(h.workers)} workers after ${TRY_TIMEOUT_MS / 1000} s`);
    }
    await Bun.sleep(HEALTH_POLL_MS);
  }
}

/** POST /runsync until COMPLETED (following up with /status-sync should runsync come back early). */
async function runsync(server: ColdServer, input: Record<string, unknown>): Promise<void> {
  const headers = bearer(server.key);
  const res = await fetch(`${server.url}/v2/${ENDPOINT}/runsync`, {
    method: "POST",
    headers,
    body: JSON.stringify({ input }),
    signal: AbortSignal.timeout(TRY_TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`runsync: HTTP ${res.status} ${await res.text()}`);
  let body = (await res.json()) as { id: string; status: string; output?: unknown };
  while (body.status === "IN_QUEUE" || body.status === "IN_PROGRESS") {
    const r = await fetch(`${server.url}/v2/${ENDPOINT}/status-sync/${body.id}`, { headers, signal: AbortSignal.timeout(TRY_TIMEOUT_MS) });
    if (!r.ok) throw new Error(`status-sync: HTTP ${r.status} ${await r.text()}`);
    body = (await r.json()) as typeof body;
  }
  if (body.status !== "COMPLETED") throw new Error(`runsync: job ${body.id} ended ${body.status}: ${JSON.stringify(body)}`);
  if (JSON.stringify(body.output) !== JSON.stringify(input)) {
    throw new Error(`runsync: echo returned ${JSON.stringify(body.output)} for ${JSON.stringify(input)}`);
  }
}

/**
 * Runs a variant's tries on a fresh server: per try, wait for zero workers, a random pause, then
 * a cold and a warm runsync. With `budgeted`, stops early past SOFT_BUDGET_S since `t0`.
 */
export async function runVariant(servers: ColdServers, v: Variant, t0: number, budgeted: boolean): Promise<void> {
  const server = await servers.start(v);
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
    await servers.stop(server);
  }
}
