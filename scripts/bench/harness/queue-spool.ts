import { queueClient, startWorkers } from "./queue-client.ts";
import { FLOOR_SCRIPT } from "./queue-processes.ts";
import type { QueueRig } from "./queue-rig.ts";
import { countdown, timeJobs, WARM_UP_JOBS, type Probe, type Throughput } from "./queue-timing.ts";
import type { SpoolProcess } from "./spool-process.ts";
import { summarize } from "./stats.ts";

/** A Spool throughput scenario: servers, workers, and how each worker takes jobs. */
export interface SpoolScenario {
  label: string;
  name: string;
  shape?: string;
  servers: number;
  workers: number;
  /** null: job-take; a number: job-take-batch of that size. */
  size: number | null;
  /** On the rig's redis-server (a fresh key prefix) rather than a fresh embedded store. */
  redis: boolean;
  /** The protocol floor (see protocol-floor-server.ts) in Spool's place, with the same workers and submitters. */
  floor?: boolean;
  /** Floor servers that share their queue through Redis (`shared=1`), also when there is one. */
  shared?: boolean;
  /** Spool of another checkout (--baseline): its `runtime/cli.ts serve` runs the servers. */
  root?: string;
  /** @default the rig's jobs */
  jobs?: number;
  probe?: Probe;
}

/** Runs no-op jobs end to end through fresh Spool servers and protocol workers in this process. */
export async function spoolThroughput(rig: QueueRig, s: SpoolScenario): Promise<Throughput> {
  const jobs = s.jobs ?? rig.settings.jobs;
  const servers: SpoolProcess[] = [];
  try {
    // Floor servers share a queue only when told to (see protocol-floor-server.ts).
    const shared = s.floor && s.shared ? "&shared=1" : "";
    const store = s.redis ? `${rig.redis!.url}?prefix=${rig.unique(s.name)}${shared}` : undefined;
    // One at a time: the first creates the store's API key, the others are handed it.
    for (let i = 0; i < s.servers; i++) {
      const as = s.floor ? { script: FLOOR_SCRIPT, key: "floor" } : { key: servers[0]?.key, root: s.root };
      servers.push(await rig.startServer(rig.unique(s.name), { store, ...as }));
    }
    const clients = servers.map(queueClient);
    const stop = new AbortController();
    const warm = s.probe ? WARM_UP_JOBS : rig.settings.warm;
    const allDone = countdown(warm + jobs);
    const workersDone = startWorkers(clients, s.workers, s.size, stop.signal, allDone.tick);
    workersDone.catch(allDone.fail);
    const timing = await timeJobs(rig, {
      jobs,
      warm,
      serverPids: servers.map((x) => x.proc.pid),
      probe: s.probe,
      allDone,
      submit: (k, i) => clients[k % clients.length]!.run({ i }),
    });
    stop.abort();
    await workersDone;

    // Asked of the last server: on Redis, any server answers for jobs taken through another.
    // Floor servers count only their own jobs: their counts are added up.
    const h = await clients[clients.length - 1]!.health();
    if (s.floor) {
      for (const c of clients.slice(0, -1)) {
        const o = await c.health();
        h.jobs.completed += o.jobs.completed;
        h.jobs.inProgress += o.jobs.inProgress;
      }
    }
    if (h.jobs.completed !== warm + jobs || h.jobs.inQueue !== 0 || h.jobs.inProgress !== 0 || h.jobs.failed !== 0) {
      throw new Error(`${s.label}: expected ${warm + jobs} completed, /health says ${JSON.stringify(h.jobs)}`);
    }
    return {
      label: s.label,
      shape: s.shape ?? s.name,
      system: s.floor ? (s.shared ? "protocol floor, shared queue" : "protocol floor") : s.root ? "Spool baseline" : "Spool",
      servers: s.servers,
      workers: s.workers,
      jobs,
      ...timing,
    };
  } finally {
    await Promise.all(servers.map(rig.stopServer));
  }
}

/** Sequential latency figures (ms) of one kind of request. */
export interface Latency {
  label: string;
  n: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

function latency(label: string, ms: number[]): Latency {
  const { n, p50, p99, mean, max } = summarize(ms);
  return { label, n, p50, p99, mean, max };
}

/**
 * /runsync round trips over an instant job, one at a time, with one protocol worker; and the
 * HTTP floor (an authed 404) on the same server. On Redis, a fresh key prefix.
 */
/** Untimed calls of each kind before the timed ones. */
export const WARM_UP = 1000;

export async function runsyncLatency(rig: QueueRig, onRedis: boolean): Promise<Latency[]> {
  const store = onRedis ? `${rig.redis!.url}?prefix=${rig.unique("runsync")}` : undefined;
  const server = await rig.startServer(rig.unique("runsync"), { store });
  const where = onRedis ? "Redis store" : "embedded store";
  const n = rig.settings.runsync;
  try {
    const c = queueClient(server);
    const stop = new AbortController();
    const worker = startWorkers([c], 1, null, stop.signal, () => {});
    let failure: unknown;
    worker.catch((e) => (failure = e));
    await Bun.sleep(200);

    const call = async () => {
      const r = await c.runsync({ ping: true });
      if (r.status !== "COMPLETED") throw new Error(`runsync ended ${r.status}: ${JSON.stringify(r)}`);
    };
    // Warm both processes' JIT before timing: a server answers many requests, and JavaScriptCore
    // compiles a function with its optimising tiers only after about a thousand calls.
    for (let i = 0; i < WARM_UP; i++) await call();
    for (let i = 0; i < WARM_UP; i++) await c.missing();

    const floor: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await c.missing();
      floor.push(performance.now() - t);
    }
    const sync: number[] = [];
    for (let i = 0; i < n; i++) {
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
    await rig.stopServer(server);
  }
}

/**
 * The same authed GET /status 404, timed the same way, against the protocol floor (a bare
 * Bun.serve that answers it without a key check or a store): the round trip itself.
 */
export async function floorLatency(rig: QueueRig): Promise<Latency> {
  const server = await rig.startServer(rig.unique("floor-latency"), { script: FLOOR_SCRIPT, key: "floor" });
  try {
    const c = queueClient(server);
    for (let i = 0; i < WARM_UP; i++) await c.missing();
    const times: number[] = [];
    for (let i = 0; i < rig.settings.runsync; i++) {
      const t = performance.now();
      await c.missing();
      times.push(performance.now() - t);
    }
    return latency("protocol floor: GET /status answered 404 by a bare Bun.serve (reference)", times);
  } finally {
    await rig.stopServer(server);
  }
}
