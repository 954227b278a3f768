#!/usr/bin/env bun
/**
 * Queue benchmark: starts a real `spool serve` in a separate process (so this client does not
 * share the server's event loop) and measures
 *   - end-to-end jobs/s of no-op jobs (POST /run, drained by protocol workers doing
 *     job-take -> job-done), with 1 and 4 workers, and 4 workers taking batches;
 *   - /runsync round-trip latency over an instant job (p50/p99).
 * Each scenario gets a fresh server on a fresh data dir, so the counts in /health are exact.
 *
 *   bun scripts/bench-queue.ts [--jobs 2000] [--runsync 500] [--clients 4] [--batch 8]
 *
 * It prints figures; it asserts only that every job it submitted completed.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { HealthResponse } from "../runtime/protocol/job-response.ts";

const ENDPOINT = "bench";
const ROOT = join(import.meta.dir, "..");

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    jobs: { type: "string", default: "2000" },
    runsync: { type: "string", default: "500" },
    clients: { type: "string", default: "4" },
    batch: { type: "string", default: "8" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) {
  console.log("usage: bun scripts/bench-queue.ts [--jobs 2000] [--runsync 500] [--clients 4] [--batch 8]");
  process.exit(0);
}
function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`bench-queue: --${name} must be a positive integer, got ${value}`);
    process.exit(2);
  }
  return n;
}
const JOBS = positiveInt("jobs", flags.jobs);
const RUNSYNC = positiveInt("runsync", flags.runsync);
const CLIENTS = positiveInt("clients", flags.clients);
const BATCH = positiveInt("batch", flags.batch);

// ---------------------------------------------------------------------------------------------
// The server process

interface Server {
  url: string;
  key: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** What the server wrote so far (for error reports). */
  output: () => string;
}

const tmpRoot = mkdtempSync(join(tmpdir(), "spool-bench-"));
const configPath = join(tmpRoot, "bench.toml");
writeFileSync(configPath, `[server]\nhost = "127.0.0.1"\ntakeWaitMs = 20000\n\n[endpoints.${ENDPOINT}]\n`);
const running = new Set<Server>();

/** Drains a pipe forever (so the server never blocks on a full pipe), calling `onText` per piece. */
async function drain(stream: ReadableStream<Uint8Array>, onText: (s: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

async function startServer(name: string): Promise<Server> {
  const dataDir = join(tmpRoot, name);
  mkdirSync(dataDir);
  const proc = Bun.spawn([process.execPath, "runtime/cli.ts", "serve", "--port", "0", "--data", dataDir, "--config", configPath], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let err = "";
  const server: Server = { url: "", key: "", proc, output: () => `--- stdout\n${out}--- stderr\n${err}` };
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
    err += s;
    if (err.length > 100_000) err = err.slice(-50_000);
  });
  void proc.exited.then((code) => ready.reject(new Error(`server exited with ${code} before it was ready`)));
  const timer = setTimeout(() => ready.reject(new Error("server not ready after 15 s")), 15_000);
  try {
    await ready.promise;
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${server.output()}`);
  } finally {
    clearTimeout(timer);
  }
  return server;
}

/** CPU seconds (user + system) the server process has used; NaN where /proc is not there. */
function serverCpu(server: Server): number {
  try {
    // Fields after the ")" that ends the command name: state is 3rd, utime 14th, stime 15th.
    const rest = readFileSync(`/proc/${server.proc.pid}/stat`, "utf8").split(") ").pop()!.split(" ");
    return (Number(rest[11]) + Number(rest[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return NaN;
  }
}

const clientCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function stopServer(server: Server): Promise<void> {
  running.delete(server);
  if (server.proc.exitCode !== null || server.proc.signalCode !== null) return;
  server.proc.kill("SIGTERM");
  const exited = await Promise.race([server.proc.exited.then(() => true), Bun.sleep(3_000).then(() => false)]);
  if (!exited) {
    server.proc.kill("SIGKILL");
    await server.proc.exited;
  }
}

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await Promise.all([...running].map(stopServer));
  rmSync(tmpRoot, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Clients

function client(server: Server) {
  const base = `${server.url}/v2/${ENDPOINT}`;
  const bearer = { authorization: `Bearer ${server.key}`, "content-type": "application/json" };
  // Workers send the key bare and a form content type, as runpod-python does.
  const bare = { authorization: server.key, "content-type": "application/x-www-form-urlencoded" };

  async function ok(res: Response, what: string): Promise<Response> {
    if (res.status !== 200 && res.status !== 204) throw new Error(`${what} answered ${res.status}: ${await res.text()}`);
    return res;
  }

  return {
    async run(input: unknown): Promise<string> {
      const res = await ok(await fetch(`${base}/run`, { method: "POST", headers: bearer, body: JSON.stringify({ input }) }), "run");
      return ((await res.json()) as { id: string }).id;
    },
    async runsync(input: unknown): Promise<{ status: string; output?: unknown }> {
      const res = await ok(await fetch(`${base}/runsync`, { method: "POST", headers: bearer, body: JSON.stringify({ input }) }), "runsync");
      return res.json() as Promise<{ status: string; output?: unknown }>;
    },
    async health(): Promise<HealthResponse> {
      const res = await ok(await fetch(`${base}/health`, { headers: bearer }), "health");
      return res.json() as Promise<HealthResponse>;
    },
    /** An authenticated request that touches the store once and answers 404: the HTTP floor. */
    async missing(): Promise<void> {
      const res = await fetch(`${base}/status/no-such-job`, { headers: bearer });
      await res.arrayBuffer();
      if (res.status !== 404) throw new Error(`status of a missing job answered ${res.status}`);
    },
    /** One job-take (size null) or job-take-batch; [] on 204. */
    async take(workerId: string, size: number | null, signal: AbortSignal): Promise<{ id: string }[]> {
      const url =
        size === null
          ? `${base}/job-take/${workerId}?gpu=bench&job_in_progress=0`
          : `${base}/job-take-batch/${workerId}?gpu=bench&batch_size=${size}&job_in_progress=0`;
      const res = await ok(await fetch(url, { headers: bare, signal }), "job-take");
      if (res.status === 204) return [];
      const body = (await res.json()) as { id: string } | { id: string }[];
      return Array.isArray(body) ? body : [body];
    },
    async done(workerId: string, jobId: string): Promise<void> {
      const res = await fetch(`${base}/job-done/${workerId}/${jobId}?gpu=bench&isStream=false`, {
        method: "POST",
        headers: bare,
        body: JSON.stringify({ output: { ok: true } }),
      });
      await ok(res, "job-done");
      await res.arrayBuffer();
    },
  };
}
type Client = ReturnType<typeof client>;

const isAbort = (e: unknown) => (e as Error)?.name === "AbortError" || (e as Error)?.name === "TimeoutError";

/**
 * Starts `workers` loops of take -> done until `stop` aborts. Calls `onDone` after each job-done
 * is answered. Rejects on the first error that is not the abort.
 */
function startWorkers(c: Client, workers: number, size: number | null, stop: AbortSignal, onDone: () => void): Promise<void> {
  const loop = async (workerId: string) => {
    while (!stop.aborted) {
      let jobs: { id: string }[];
      try {
        jobs = await c.take(workerId, size, stop);
      } catch (e) {
        if (stop.aborted && isAbort(e)) return;
        throw e;
      }
      // A batch worker runs its jobs concurrently and reports each as it finishes.
      await Promise.all(
        jobs.map(async (j) => {
          await c.done(workerId, j.id);
          onDone();
        }),
      );
    }
  };
  return Promise.all(Array.from({ length: workers }, (_, i) => loop(`bench-w${i}`))).then(() => {});
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Throughput {
  label: string;
  jobs: number;
  seconds: number;
  submitSeconds: number;
  serverCpuS: number;
  clientCpuS: number;
}

async function throughput(label: string, name: string, workers: number, size: number | null): Promise<Throughput> {
  const server = await startServer(name);
  try {
    const c = client(server);
    const stop = new AbortController();
    let done = 0;
    const allDone = Promise.withResolvers<number>();
    const workersDone = startWorkers(c, workers, size, stop.signal, () => {
      if (++done === JOBS) allDone.resolve(performance.now());
    });
    workersDone.catch((e) => allDone.reject(e));
    // Let the workers park on their first (empty) job-take before the clock starts.
    await Bun.sleep(200);

    const cpu0 = [serverCpu(server), clientCpu()] as const;
    const start = performance.now();
    let next = 0;
    const submitters = Array.from({ length: Math.min(CLIENTS, JOBS) }, async () => {
      while (next < JOBS) {
        const i = next++;
        await c.run({ i });
      }
    });
    const submitted = Promise.all(submitters).then(() => performance.now());
    submitted.catch((e) => allDone.reject(e));
    const [end, submitEnd] = await Promise.all([allDone.promise, submitted]);
    const cpu1 = [serverCpu(server), clientCpu()] as const;
    stop.abort();
    await workersDone;

    const h = await c.health();
    if (h.jobs.completed !== JOBS || h.jobs.inQueue !== 0 || h.jobs.inProgress !== 0 || h.jobs.failed !== 0) {
      throw new Error(`${label}: expected ${JOBS} completed, /health says ${JSON.stringify(h.jobs)}`);
    }
    return { label, jobs: JOBS, seconds: (end - start) / 1000, submitSeconds: (submitEnd - start) / 1000,
      serverCpuS: cpu1[0] - cpu0[0], clientCpuS: cpu1[1] - cpu0[1] };
  } finally {
    await stopServer(server);
  }
}

interface Latency {
  label: string;
  n: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

function latency(label: string, ms: number[]): Latency {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
  return { label, n: s.length, p50: at(0.5), p99: at(0.99), mean: s.reduce((a, b) => a + b, 0) / s.length, max: s[s.length - 1]! };
}

async function runsyncLatency(): Promise<Latency[]> {
  const server = await startServer("runsync");
  try {
    const c = client(server);
    const stop = new AbortController();
    const worker = startWorkers(c, 1, null, stop.signal, () => {});
    let failure: unknown;
    worker.catch((e) => (failure = e));
    await Bun.sleep(200);

    const call = async () => {
      const r = await c.runsync({ ping: true });
      if (r.status !== "COMPLETED") throw new Error(`runsync ended ${r.status}: ${JSON.stringify(r)}`);
    };
    // Warm both processes' JIT before timing.
    for (let i = 0; i < Math.min(50, RUNSYNC); i++) await call();
    for (let i = 0; i < Math.min(50, RUNSYNC); i++) await c.missing();

    const floor: number[] = [];
    for (let i = 0; i < RUNSYNC; i++) {
      const t = performance.now();
      await c.missing();
      floor.push(performance.now() - t);
    }
    const sync: number[] = [];
    for (let i = 0; i < RUNSYNC; i++) {
      if (failure) throw failure;
      const t = performance.now();
      await call();
      sync.push(performance.now() - t);
    }
    stop.abort();
    await worker;
    return [latency("POST /runsync, instant job (take + done inside)", sync), latency("baseline: authed GET /status 404", floor)];
  } finally {
    await stopServer(server);
  }
}

// ---------------------------------------------------------------------------------------------
// Main

async function machine(): Promise<string> {
  let nproc = String(navigator.hardwareConcurrency);
  try {
    const p = Bun.spawnSync(["nproc"]);
    if (p.exitCode === 0) nproc = p.stdout.toString().trim();
  } catch {}
  return `nproc ${nproc}, ${cpus()[0]?.model ?? "unknown CPU"}, bun ${Bun.version} (${Bun.revision.slice(0, 9)}), ${process.platform}-${process.arch}`;
}

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

async function main(): Promise<void> {
  const t0 = performance.now();
  const info = await machine();
  console.log(`spool queue benchmark: ${JOBS} no-op jobs per throughput run, ${CLIENTS} submit loops; ${RUNSYNC} runsync calls`);
  console.log(`machine: ${info}\n`);

  const runs: Throughput[] = [];
  for (const [label, name, w, size] of [
    ["1 worker, job-take", "w1", 1, null],
    ["4 workers, job-take", "w4", 4, null],
    [`4 workers, job-take-batch (batch_size=${BATCH})`, "w4-batch", 4, BATCH],
  ] as const) {
    const r = await throughput(label, name, w, size);
    runs.push(r);
    console.log(`  ${label}: ${f1(r.jobs / r.seconds)} jobs/s`);
  }
  const lat = await runsyncLatency();
  console.log(`  runsync: p50 ${f2(lat[0]!.p50)} ms, p99 ${f2(lat[0]!.p99)} ms\n`);

  console.log("| scenario | jobs | end-to-end s | jobs/s | submit-only jobs/s | server CPU µs/job | client CPU µs/job |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const r of runs) {
    const us = (s: number) => (Number.isNaN(s) ? "n/a" : (s * 1e6 / r.jobs).toFixed(0));
    console.log(
      `| ${r.label} | ${r.jobs} | ${f2(r.seconds)} | **${f1(r.jobs / r.seconds)}** | ${f1(r.jobs / r.submitSeconds)} | ${us(r.serverCpuS)} | ${us(r.clientCpuS)} |`,
    );
  }
  console.log("");
  console.log("| latency (sequential) | n | p50 ms | p99 ms | mean ms | max ms |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const l of lat) console.log(`| ${l.label} | ${l.n} | **${f2(l.p50)}** | **${f2(l.p99)}** | ${f2(l.mean)} | ${f2(l.max)} |`);
  console.log("");
  console.log(`machine: ${info}; server in its own process, client and workers in this one`);
  console.log(`"submit-only jobs/s" is the rate POST /run was answered while the workers drained; CPU is user+system`);
  console.log(`over the timed window (server from /proc, 10 ms ticks); total ${f1((performance.now() - t0) / 1000)} s`);
}

try {
  await main();
} catch (e) {
  console.error(`bench-queue failed: ${(e as Error).stack ?? e}`);
  for (const s of running) console.error(s.output());
  process.exitCode = 1;
} finally {
  await cleanup();
}
