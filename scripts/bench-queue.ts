#!/usr/bin/env bun
/**
 * Queue benchmark. Spool servers run as `spool serve` in separate processes (so this client does
 * not share a server's event loop); this process runs the submitters and the protocol workers
 * (job-take -> job-done over HTTP). It measures
 *   - embedded store: end-to-end jobs/s of no-op jobs with 1 and 4 workers, and 4 workers
 *     taking batches; /runsync round-trip latency over an instant job (p50/p99);
 *   - Redis store: a throwaway redis-server (AOF on, appendfsync everysec) and the same
 *     scenarios on 1 server and on 2 servers sharing it (workers and submitters spread over both
 *     URLs), then the same jobs through BullMQ on the same redis-server with the same number of
 *     workers and the same concurrency, printed as the ratio Spool/BullMQ; plus an untimed
 *     pass under MONITOR that counts Redis round trips per job for each.
 * Each scenario gets fresh servers on a fresh data dir or Redis key prefix, so the counts in
 * /health are exact.
 *
 *   bun scripts/bench-queue.ts [--mode embedded|redis|all] [--store embedded|redis]
 *       [--jobs 3000] [--runsync 500] [--clients 4] [--batch 8] [--profile 200]
 *
 * `--store redis` is `--mode redis`. It prints figures; it asserts only that every job it
 * submitted completed.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Queue, Worker } from "bullmq";
import type { HealthResponse } from "../runtime/protocol/job-response.ts";
import { DUTY_SCRIPTS } from "../runtime/server/store/redis/redis-lua-duties.ts";
import { JOB_SCRIPTS, PRELUDE } from "../runtime/server/store/redis/redis-lua-jobs.ts";

const ENDPOINT = "bench";
const ROOT = join(import.meta.dir, "..");
const USAGE =
  "usage: bun scripts/bench-queue.ts [--mode embedded|redis|all] [--store embedded|redis] [--jobs 3000] [--runsync 500]\n" +
  "                                  [--clients 4] [--batch 8] [--profile 200 (jobs under MONITOR; 0 skips)]";

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    mode: { type: "string" },
    store: { type: "string" },
    jobs: { type: "string", default: "3000" },
    runsync: { type: "string", default: "500" },
    clients: { type: "string", default: "4" },
    batch: { type: "string", default: "8" },
    profile: { type: "string", default: "200" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
function usageError(message: string): never {
  console.error(`bench-queue: ${message}\n${USAGE}`);
  process.exit(2);
}
function count(name: string, value: string, min = 1): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) usageError(`--${name} must be an integer >= ${min}, got ${value}`);
  return n;
}
const JOBS = count("jobs", flags.jobs);
const RUNSYNC = count("runsync", flags.runsync);
const CLIENTS = count("clients", flags.clients);
const BATCH = count("batch", flags.batch);
const PROFILE = count("profile", flags.profile, 0);
const MODES = ["embedded", "redis", "all"] as const;
type Mode = (typeof MODES)[number];
if (flags.mode !== undefined && flags.store !== undefined && flags.mode !== flags.store) {
  usageError(`--mode ${flags.mode} and --store ${flags.store} disagree`);
}
const MODE = (flags.mode ?? flags.store ?? "all") as Mode;
if (!MODES.includes(MODE)) usageError(`--mode must be one of ${MODES.join(", ")}, got ${MODE}`);
if (flags.store !== undefined && flags.store !== "embedded" && flags.store !== "redis") {
  usageError(`--store must be embedded or redis, got ${flags.store}`);
}

// ---------------------------------------------------------------------------------------------
// Processes: Spool servers and a throwaway redis-server, all stopped on any exit

interface Server {
  url: string;
  key: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** What the server wrote so far (for error reports). */
  output: () => string;
}

interface RedisServer {
  port: number;
  url: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** A connection of this process, for INFO, FLUSHALL and markers. */
  client: Bun.RedisClient;
  output: () => string;
}

const tmpRoot = mkdtempSync(join(tmpdir(), "spool-bench-"));
const configPath = join(tmpRoot, "bench.toml");
// The spec's per-window request counts would cap a run at 100 POST /run a second: lift them,
// keep the spec's `concurrent` limits (so admission is counted as in a default deployment), and
// raise workersMax so the 429 backpressure rule (queue > workersMax * 500) does not trip.
writeFileSync(
  configPath,
  `[server]
host = "127.0.0.1"
takeWaitMs = 20000

[endpoints.${ENDPOINT}]
workersMax = 1000

[endpoints.${ENDPOINT}.rateLimits]
run = { requests = 100000000, concurrent = 200 }
runsync = { requests = 100000000, concurrent = 400 }
status = { requests = 100000000, concurrent = 400 }
`,
);
const running = new Set<Server>();
let redis: RedisServer | undefined;

/** Drains a pipe forever (so the child never blocks on a full pipe), calling `onText` per piece. */
async function drain(stream: ReadableStream<Uint8Array>, onText: (s: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

/** Keeps the last ~50 kB of a child's output. */
function tail(): { add: (s: string) => void; text: () => string } {
  let t = "";
  return {
    add: (s) => {
      t += s;
      if (t.length > 100_000) t = t.slice(-50_000);
    },
    text: () => t,
  };
}

/**
 * Starts `spool serve`. With `store` (a Redis URL) it shares that store; `key` is an API key
 * that store already has (a server only prints a key when it creates the first one).
 */
async function startServer(name: string, opts: { store?: string; key?: string } = {}): Promise<Server> {
  const dataDir = join(tmpRoot, name);
  mkdirSync(dataDir);
  const store = opts.store ? ["--store", opts.store] : [];
  const proc = Bun.spawn([process.execPath, "runtime/cli.ts", "serve", "--port", "0", "--data", dataDir, "--config", configPath, ...store], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  const err = tail();
  const server: Server = { url: "", key: opts.key ?? "", proc, output: () => `--- ${name} stdout\n${out}--- ${name} stderr\n${err.text()}` };
  running.add(server);

  const ready = Promise.withResolvers<void>();
  const check = () => {
    const key = opts.key ?? /created one named "default"[^\n]*\n\s*\n?\s*(\S+)\s*\n/.exec(out)?.[1];
    const url = /Spool listening on (http:\/\/\S+)/.exec(out)?.[1];
    if (key && url) {
      server.key = key;
      server.url = url;
      ready.resolve();
    }
  };
  void drain(proc.stdout, (s) => {
    if (out.length < 100_000) out += s;
    if (!server.url) check();
  });
  void drain(proc.stderr, err.add);
  void proc.exited.then((code) => ready.reject(new Error(`server ${name} exited with ${code} before it was ready`)));
  const timer = setTimeout(() => ready.reject(new Error(`server ${name} not ready after 15 s`)), 15_000);
  try {
    await ready.promise;
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${server.output()}`);
  } finally {
    clearTimeout(timer);
  }
  return server;
}

/** CPU seconds (user + system) a child process has used; NaN where /proc is not there. */
function procCpu(pid: number): number {
  try {
    // Fields after the ")" that ends the command name: state is 3rd, utime 14th, stime 15th.
    const rest = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ").pop()!.split(" ");
    return (Number(rest[11]) + Number(rest[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return NaN;
  }
}

const clientCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function stopProc(proc: Bun.Subprocess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill("SIGTERM");
  const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(3_000).then(() => false)]);
  if (!exited) {
    proc.kill("SIGKILL");
    await proc.exited;
  }
}

async function stopServer(server: Server): Promise<void> {
  running.delete(server);
  await stopProc(server.proc);
}

async function freePort(): Promise<number> {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/** A redis-server of its own: AOF on (fsync every second), a temp dir, a free loopback port. */
async function startRedis(): Promise<RedisServer> {
  const dir = join(tmpRoot, "redis");
  mkdirSync(dir);
  const port = await freePort();
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec"];
  let proc: RedisServer["proc"];
  try {
    proc = Bun.spawn(["redis-server", ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    throw new Error(`cannot start redis-server (apt-get install redis-server): ${(e as Error).message}`);
  }
  const out = tail();
  void drain(proc.stdout, out.add);
  void drain(proc.stderr, out.add);
  const url = `redis://127.0.0.1:${port}`;
  redis = { port, url, proc, client: undefined as unknown as Bun.RedisClient, output: () => `--- redis-server\n${out.text()}` };
  for (let i = 0; i < 500; i++) {
    if (proc.exitCode !== null) break;
    const c = new Bun.RedisClient(url, { autoReconnect: false });
    try {
      await c.send("PING", []);
      redis.client = c;
      return redis;
    } catch {
      c.close();
      await Bun.sleep(10);
    }
  }
  throw new Error(`redis-server did not start on port ${port}\n${redis.output()}`);
}

let cleaned = false;
let interrupted = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await Promise.all([...running].map(stopServer));
  if (redis) {
    redis.client?.close();
    await stopProc(redis.proc);
  }
  rmSync(tmpRoot, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    interrupted = true;
    console.error(`bench-queue: ${sig}, stopping the servers and redis-server`);
    void cleanup().finally(() => process.exit(130));
  });
}
// Last resort (an exit before cleanup ran): no child and no temp dir outlives this process.
process.on("exit", () => {
  for (const s of running) s.proc.kill("SIGKILL");
  redis?.proc.kill("SIGKILL");
  rmSync(tmpRoot, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Redis counters

type CommandStats = Map<string, number>;

async function commandStats(): Promise<CommandStats> {
  const text = (await redis!.client.send("INFO", ["commandstats"])) as string;
  const stats: CommandStats = new Map();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(m[1]!, Number(m[2]));
  return stats;
}

/** Commands Redis ran between two snapshots (commands inside Lua scripts included), less ours. */
function commandsBetween(a: CommandStats, b: CommandStats): number {
  let total = 0;
  for (const [cmd, calls] of b) if (cmd !== "info") total += calls - (a.get(cmd) ?? 0);
  return total;
}

const sha1 = (text: string) => new Bun.CryptoHasher("sha1").update(text).digest("hex");
/** Names Spool's and BullMQ's scripts by the SHA1 that EVALSHA sends (for the MONITOR breakdown). */
const SCRIPT_NAMES = new Map(Object.entries({ ...JOB_SCRIPTS, ...DUTY_SCRIPTS }).map(([name, src]) => [sha1(PRELUDE + src), name]));
try {
  const bull = (await import("bullmq/dist/esm/scripts/index.js")) as Record<string, { name?: string; content?: string }>;
  for (const s of Object.values(bull)) if (s?.name && s.content) SCRIPT_NAMES.set(sha1(s.content), `bullmq ${s.name}`);
} catch {
  // A BullMQ of another layout: its scripts show as "sha <prefix>".
}

interface Monitor {
  /** Commands sent by clients (one round trip each), by command (EVALSHA by script name). */
  topLevel: Map<string, number>;
  /** Commands run inside Lua scripts and functions, by command. */
  inScripts: Map<string, number>;
  begin(): Promise<void>;
  end(): Promise<void>;
}

/**
 * `redis-cli monitor`, counting between an ECHO marker sent by begin() and one sent by end().
 * Ours are the only ECHOs, so the window is exact; MONITOR slows Redis, so this pass is untimed.
 */
async function startMonitor(): Promise<{ monitor: Monitor; stop: () => Promise<void> }> {
  const proc = Bun.spawn(["redis-cli", "-p", String(redis!.port), "monitor"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const topLevel = new Map<string, number>();
  const inScripts = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  let counting = false;
  const seen = new Map<string, () => void>();
  let buf = "";
  const lines = drain(proc.stdout, (s) => {
    buf += s;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    for (const line of parts) {
      if (line.trim() === "OK") seen.get("OK")?.();
      // 1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "sha" ...   or   [0 lua] "HSET" ...
      const m = /^\S+ \[\d+ ([^\]]+)\] "([^"]+)"(?: "([^"]*)")?/.exec(line);
      if (!m) continue;
      const [, from, rawCmd, arg1] = m;
      const cmd = rawCmd!.toUpperCase();
      if (cmd === "ECHO" && arg1?.startsWith("bench-monitor-")) {
        seen.get(arg1)?.();
        continue;
      }
      if (!counting) continue;
      if (from === "lua") add(inScripts, cmd);
      else if (cmd === "EVALSHA") add(topLevel, `EVALSHA ${SCRIPT_NAMES.get(arg1 ?? "") ?? "sha " + (arg1 ?? "").slice(0, 8)}`);
      else add(topLevel, cmd);
    }
  });
  const marker = async (name: string) => {
    const got = Promise.withResolvers<void>();
    seen.set(name, got.resolve);
    const t = setTimeout(() => got.reject(new Error(`MONITOR did not show ${name} in 10 s`)), 10_000);
    try {
      if (name !== "OK") await redis!.client.send("ECHO", [name]);
      await got.promise;
    } finally {
      clearTimeout(t);
    }
  };
  await marker("OK"); // redis-cli prints OK once MONITOR is on
  const monitor: Monitor = {
    topLevel,
    inScripts,
    async begin() {
      await marker("bench-monitor-begin");
      counting = true;
    },
    async end() {
      await marker("bench-monitor-end");
      counting = false;
    },
  };
  return {
    monitor,
    stop: async () => {
      proc.kill("SIGTERM");
      await proc.exited;
      await lines.catch(() => {});
    },
  };
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
 * Starts `workers` loops of take -> done until `stop` aborts, worker i on clients[i % n]. Calls
 * `onDone` after each job-done is answered. Rejects on the first error that is not the abort.
 */
function startWorkers(clients: Client[], workers: number, size: number | null, stop: AbortSignal, onDone: () => void): Promise<void> {
  const loop = async (c: Client, workerId: string) => {
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
  return Promise.all(Array.from({ length: workers }, (_, i) => loop(clients[i % clients.length]!, `bench-w${i}`))).then(() => {});
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Throughput {
  label: string;
  /** Which of the scenario shapes (worker count and concurrency) it ran. */
  shape: string;
  system: "Spool" | "BullMQ";
  /** Spool servers; 0 for BullMQ (in this process). */
  servers: number;
  workers: number;
  jobs: number;
  seconds: number;
  submitSeconds: number;
  /** CPU of the Spool server processes (all of them). */
  serverCpuS: number;
  /** CPU of this process: submitters and workers. */
  clientCpuS: number;
  redisCpuS: number;
  /** Commands Redis ran, those inside scripts included. */
  redisCommands: number;
}

/** Called once the workers are parked (before the clock starts) and once every job is done. */
interface Probe {
  begin(): Promise<void>;
  end(): Promise<void>;
}

let prefixSeq = 0;

interface SpoolScenario {
  label: string;
  name: string;
  shape?: string;
  servers: number;
  workers: number;
  size: number | null;
  redis: boolean;
  jobs?: number;
  probe?: Probe;
}

/** Before/after readings of CPU and Redis counters around a timed window. */
async function readings(serverPids: number[]) {
  const stats = redis ? await commandStats() : undefined;
  return {
    server: serverPids.reduce((a, pid) => a + procCpu(pid), 0),
    client: clientCpu(),
    redis: redis ? procCpu(redis.proc.pid) : NaN,
    stats,
  };
}

async function spoolThroughput(s: SpoolScenario): Promise<Throughput> {
  const jobs = s.jobs ?? JOBS;
  const servers: Server[] = [];
  try {
    const store = s.redis ? `${redis!.url}?prefix=${s.name}-${++prefixSeq}` : undefined;
    // One at a time: the first creates the store's API key, the others are handed it.
    for (let i = 0; i < s.servers; i++) {
      servers.push(await startServer(`${s.name}-${++prefixSeq}`, { store, key: servers[0]?.key }));
    }
    const clients = servers.map(client);
    const stop = new AbortController();
    let done = 0;
    const allDone = Promise.withResolvers<number>();
    allDone.promise.catch(() => {}); // awaited later; a failure before then is not unhandled
    const workersDone = startWorkers(clients, s.workers, s.size, stop.signal, () => {
      if (++done === jobs) allDone.resolve(performance.now());
    });
    workersDone.catch((e) => allDone.reject(e));
    // Let the workers park on their first (empty) job-take before the clock starts.
    await Bun.sleep(200);
    await s.probe?.begin();

    const pids = servers.map((x) => x.proc.pid);
    const r0 = await readings(pids);
    const start = performance.now();
    let next = 0;
    const submitters = Array.from({ length: Math.min(CLIENTS, jobs) }, async (_, k) => {
      const c = clients[k % clients.length]!;
      while (next < jobs) {
        const i = next++;
        await c.run({ i });
      }
    });
    const submitted = Promise.all(submitters).then(() => performance.now());
    submitted.catch((e) => allDone.reject(e));
    const [end, submitEnd] = await Promise.all([allDone.promise, submitted]);
    const r1 = await readings(pids);
    await s.probe?.end();
    stop.abort();
    await workersDone;

    // Asked of the last server: on Redis, any server answers for jobs taken through another.
    const h = await clients[clients.length - 1]!.health();
    if (h.jobs.completed !== jobs || h.jobs.inQueue !== 0 || h.jobs.inProgress !== 0 || h.jobs.failed !== 0) {
      throw new Error(`${s.label}: expected ${jobs} completed, /health says ${JSON.stringify(h.jobs)}`);
    }
    return {
      label: s.label,
      shape: s.shape ?? s.name,
      system: "Spool",
      servers: s.servers,
      workers: s.workers,
      jobs,
      seconds: (end - start) / 1000,
      submitSeconds: (submitEnd - start) / 1000,
      serverCpuS: r1.server - r0.server,
      clientCpuS: r1.client - r0.client,
      redisCpuS: r1.redis - r0.redis,
      redisCommands: r0.stats && r1.stats ? commandsBetween(r0.stats, r1.stats) : NaN,
    };
  } finally {
    await Promise.all(servers.map(stopServer));
  }
}

/**
 * The same job flow through BullMQ on the same redis-server: `workers` Workers (in this process)
 * of `concurrency` each with a no-op processor, `CLIENTS` loops of queue.add, timed from the
 * first add to the last 'completed' event. Completed jobs are kept, as Spool keeps them.
 */
async function bullThroughput(
  label: string,
  shape: string,
  workers: number,
  concurrency: number,
  opts: { jobs?: number; probe?: Probe } = {},
): Promise<Throughput> {
  const jobs = opts.jobs ?? JOBS;
  const name = `bench-${++prefixSeq}`;
  const connection = { host: "127.0.0.1", port: redis!.port, maxRetriesPerRequest: null };
  const queue = new Queue(name, { connection });
  const ws: Worker[] = [];
  try {
    let done = 0;
    const allDone = Promise.withResolvers<number>();
    allDone.promise.catch(() => {}); // awaited later; a failure before then is not unhandled
    for (let i = 0; i < workers; i++) {
      const w = new Worker(name, async () => ({ ok: true }), { connection, concurrency });
      w.on("completed", () => {
        if (++done === jobs) allDone.resolve(performance.now());
      });
      w.on("failed", (job, err) => allDone.reject(new Error(`BullMQ job ${job?.id} failed: ${err.message}`)));
      w.on("error", (err) => allDone.reject(err));
      ws.push(w);
    }
    await Promise.all([queue.waitUntilReady(), ...ws.map((w) => w.waitUntilReady())]);
    await Bun.sleep(200);
    await opts.probe?.begin();

    const r0 = await readings([]);
    const start = performance.now();
    let next = 0;
    const submitters = Array.from({ length: Math.min(CLIENTS, jobs) }, async () => {
      while (next < jobs) {
        const i = next++;
        await queue.add("noop", { i });
      }
    });
    const submitted = Promise.all(submitters).then(() => performance.now());
    submitted.catch((e) => allDone.reject(e));
    const [end, submitEnd] = await Promise.all([allDone.promise, submitted]);
    const r1 = await readings([]);
    await opts.probe?.end();

    const counts = await queue.getJobCounts("completed", "failed", "waiting", "active", "delayed");
    if (counts.completed !== jobs || counts.failed || counts.waiting || counts.active || counts.delayed) {
      throw new Error(`${label}: expected ${jobs} completed, BullMQ counts ${JSON.stringify(counts)}`);
    }
    return {
      label,
      shape,
      system: "BullMQ",
      servers: 0,
      workers,
      jobs,
      seconds: (end - start) / 1000,
      submitSeconds: (submitEnd - start) / 1000,
      serverCpuS: 0,
      clientCpuS: r1.client - r0.client,
      redisCpuS: r1.redis - r0.redis,
      redisCommands: r0.stats && r1.stats ? commandsBetween(r0.stats, r1.stats) : NaN,
    };
  } finally {
    await Promise.all(ws.map((w) => w.close()));
    await queue.close();
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

async function runsyncLatency(onRedis: boolean): Promise<Latency[]> {
  const store = onRedis ? `${redis!.url}?prefix=runsync-${++prefixSeq}` : undefined;
  const server = await startServer(`runsync-${++prefixSeq}`, { store });
  const where = onRedis ? "Redis store" : "embedded store";
  try {
    const c = client(server);
    const stop = new AbortController();
    const worker = startWorkers([c], 1, null, stop.signal, () => {});
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
    return [
      latency(`${where}: POST /runsync, instant job (take + done inside)`, sync),
      latency(`${where}: baseline, authed GET /status 404`, floor),
    ];
  } finally {
    await stopServer(server);
  }
}

/** Runs `run` with MONITOR counting from the probe's begin to its end. */
async function profile(run: (probe: Probe) => Promise<Throughput>): Promise<{ r: Throughput; topLevel: Map<string, number>; inScripts: Map<string, number> }> {
  const { monitor, stop } = await startMonitor();
  try {
    const r = await run(monitor);
    return { r, topLevel: monitor.topLevel, inScripts: monitor.inScripts };
  } finally {
    await stop();
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
  const gib = (() => {
    try {
      return ` ${Math.round(Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]) / 1024 / 1024)} GiB RAM,`;
    } catch {
      return "";
    }
  })();
  let load = "";
  try {
    load = `, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} at start`;
  } catch {}
  return `nproc ${nproc},${gib} ${cpus()[0]?.model ?? "unknown CPU"}, bun ${Bun.version} (${Bun.revision.slice(0, 9)}), ${process.platform}-${process.arch}${load}`;
}

async function versions(): Promise<string> {
  const v = (await redis!.client.send("INFO", ["server"])) as string;
  const redisVersion = /redis_version:(\S+)/.exec(v)?.[1] ?? "?";
  const bull = (await import("bullmq/package.json", { with: { type: "json" } })).default.version as string;
  return `redis-server ${redisVersion} (appendonly yes, appendfsync everysec), bullmq ${bull}`;
}

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const rate = (r: Throughput) => r.jobs / r.seconds;
const perJob = (r: Throughput, s: number) => (Number.isNaN(s) ? "n/a" : ((s * 1e6) / r.jobs).toFixed(0));

function throughputTable(runs: Throughput[], onRedis: boolean): void {
  if (onRedis) {
    console.log(
      "| system | servers | workers × concurrency | jobs | end-to-end s | jobs/s | submit-only jobs/s | Spool servers CPU µs/job " +
        "| bench process CPU µs/job | redis-server CPU µs/job | Redis commands/job |",
    );
    console.log("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  } else {
    console.log("| scenario | jobs | end-to-end s | jobs/s | submit-only jobs/s | server CPU µs/job | client CPU µs/job |");
    console.log("|---|---:|---:|---:|---:|---:|---:|");
  }
  for (const r of runs) {
    const common = `${r.jobs} | ${f2(r.seconds)} | **${f1(rate(r))}** | ${f1(r.jobs / r.submitSeconds)}`;
    if (!onRedis) {
      console.log(`| ${r.label} | ${common} | ${perJob(r, r.serverCpuS)} | ${perJob(r, r.clientCpuS)} |`);
      continue;
    }
    const servers = r.system === "BullMQ" ? "— (in-process)" : String(r.servers);
    const cmds = Number.isNaN(r.redisCommands) ? "n/a" : f1(r.redisCommands / r.jobs);
    const serverCpu = r.system === "BullMQ" ? "—" : perJob(r, r.serverCpuS);
    console.log(`| ${r.system} | ${servers} | ${r.label} | ${common} | ${serverCpu} | ${perJob(r, r.clientCpuS)} | ${perJob(r, r.redisCpuS)} | ${cmds} |`);
  }
  console.log("");
}

function breakdown(m: Map<string, number>, jobs: number): string {
  const total = [...m.values()].reduce((a, b) => a + b, 0);
  const parts = [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .filter(([, n]) => n / jobs >= 0.05)
    .map(([k, n]) => `${k} ${f2(n / jobs)}`);
  return `**${f1(total / jobs)}**${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const info = await machine();
  console.log(`spool queue benchmark (mode ${MODE}): ${JOBS} no-op jobs per throughput run, ${CLIENTS} submit loops; ${RUNSYNC} runsync calls`);
  console.log(`machine: ${info}\n`);

  const embedded: Throughput[] = [];
  const onRedis: Throughput[] = [];
  const lat: Latency[] = [];
  let redisInfo = "";
  const profiles: { label: string; r: Throughput; topLevel: Map<string, number>; inScripts: Map<string, number> }[] = [];
  const log = (r: Throughput) => {
    const where = r.system === "Spool" ? `, ${r.servers} server${r.servers > 1 ? "s" : ""}` : "";
    console.log(`  ${r.system}${where}, ${r.label}: ${f1(rate(r))} jobs/s`);
  };

  const shapes = [
    { label: "1 worker × 1 (job-take)", name: "w1", workers: 1, size: null, concurrency: 1 },
    { label: "4 workers × 1 (job-take)", name: "w4", workers: 4, size: null, concurrency: 1 },
    { label: `4 workers × ${BATCH} (job-take-batch, batch_size=${BATCH})`, name: "w4-batch", workers: 4, size: BATCH, concurrency: BATCH },
  ] as const;

  if (MODE !== "redis") {
    console.log("embedded store:");
    for (const sh of shapes) {
      const r = await spoolThroughput({ ...sh, servers: 1, redis: false });
      embedded.push(r);
      log(r);
    }
    const l = await runsyncLatency(false);
    lat.push(...l);
    console.log(`  runsync: p50 ${f2(l[0]!.p50)} ms, p99 ${f2(l[0]!.p99)} ms\n`);
  }

  if (MODE !== "embedded") {
    await startRedis();
    redisInfo = await versions();
    console.log(`Redis store and BullMQ on one ${redisInfo}, port ${redis!.port}:`);
    for (const sh of shapes) {
      for (const servers of [1, 2]) {
        await redis!.client.send("FLUSHALL", []);
        const r = await spoolThroughput({ ...sh, name: `${sh.name}-s${servers}`, shape: sh.name, servers, redis: true });
        onRedis.push(r);
        log(r);
      }
      await redis!.client.send("FLUSHALL", []);
      const bLabel = sh.size === null ? sh.label : `${sh.workers} workers × ${sh.concurrency} (Worker concurrency ${sh.concurrency})`;
      const b = await bullThroughput(bLabel, sh.name, sh.workers, sh.concurrency);
      onRedis.push(b);
      log(b);
    }
    const l = await runsyncLatency(true);
    lat.push(...l);
    console.log(`  runsync on Redis: p50 ${f2(l[0]!.p50)} ms, p99 ${f2(l[0]!.p99)} ms`);
    if (PROFILE > 0) {
      await redis!.client.send("FLUSHALL", []);
      const sp = await profile((probe) => spoolThroughput({ ...shapes[0], name: "profile", servers: 1, redis: true, jobs: PROFILE, probe }));
      profiles.push({ label: "Spool, 1 server, 1 worker × 1", ...sp });
      const bp = await profile((probe) => bullThroughput(shapes[0].label, "profile", 1, 1, { jobs: PROFILE, probe }));
      profiles.push({ label: "BullMQ, 1 worker × 1", ...bp });
      console.log(`  MONITOR pass (${PROFILE} jobs each, untimed): done`);
    }
    console.log("");
  }

  if (embedded.length) {
    console.log("### Embedded store (SQLite), 1 server\n");
    throughputTable(embedded, false);
  }
  if (onRedis.length) {
    console.log(`### Redis store vs BullMQ on the same Redis\n`);
    throughputTable(onRedis, true);
    console.log(
      "| workers × concurrency | BullMQ jobs/s | Spool 1 server jobs/s | Spool/BullMQ, 1 server | Spool 2 servers jobs/s | Spool/BullMQ, 2 servers |",
    );
    console.log("|---|---:|---:|---:|---:|---:|");
    for (const sh of shapes) {
      const pick = (system: string, servers: number) => onRedis.find((r) => r.system === system && r.servers === servers && r.shape === sh.name)!;
      const b = pick("BullMQ", 0);
      const s1 = pick("Spool", 1);
      const s2 = pick("Spool", 2);
      const what = sh.size === null ? `${sh.label}` : `${sh.workers} × ${BATCH} (Spool job-take-batch vs BullMQ concurrency ${BATCH})`;
      console.log(`| ${what} | ${f1(rate(b))} | ${f1(rate(s1))} | **${f2(rate(s1) / rate(b))}** | ${f1(rate(s2))} | **${f2(rate(s2) / rate(b))}** |`);
    }
    console.log("");
  }
  if (profiles.length) {
    console.log(`### Redis commands per job under MONITOR (${PROFILE} jobs, 1 worker, untimed)\n`);
    console.log("| system | round trips/job (commands sent by clients) | commands/job inside Lua |");
    console.log("|---|---|---|");
    for (const p of profiles) console.log(`| ${p.label} | ${breakdown(p.topLevel, p.r.jobs)} | ${breakdown(p.inScripts, p.r.jobs)} |`);
    console.log("");
  }
  if (lat.length) {
    console.log("| latency (sequential) | n | p50 ms | p99 ms | mean ms | max ms |");
    console.log("|---|---:|---:|---:|---:|---:|");
    for (const l of lat) console.log(`| ${l.label} | ${l.n} | **${f2(l.p50)}** | **${f2(l.p99)}** | ${f2(l.mean)} | ${f2(l.max)} |`);
    console.log("");
  }
  console.log(`machine: ${info}${redisInfo ? `; ${redisInfo}` : ""}`);
  console.log(`Spool servers run in their own processes; the submit loops (${CLIENTS}) and Spool's protocol workers (HTTP job-take -> job-done)`);
  const bullNote = " BullMQ's Workers run in this process too and talk to Redis directly (no HTTP hop, no server process).";
  console.log(`run in this one.${onRedis.length ? bullNote : ""}`);
  console.log(`"submit-only jobs/s" is the rate submissions were answered while the workers drained; CPU is user+system over the`);
  const statsNote = " Redis commands/job counts commands inside scripts too (INFO commandstats).";
  console.log(`timed window (other processes from /proc, 10 ms ticks).${onRedis.length ? statsNote : ""}`);
  console.log(`total ${f1((performance.now() - t0) / 1000)} s`);
}

try {
  await main();
} catch (e) {
  if (interrupted) await new Promise(() => {}); // the signal handler cleans up and exits
  console.error(`bench-queue failed: ${(e as Error).stack ?? e}`);
  for (const s of running) console.error(s.output());
  if (redis) console.error(redis.output());
  process.exitCode = 1;
} finally {
  await cleanup();
}
