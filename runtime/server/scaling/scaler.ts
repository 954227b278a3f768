import type { Clock } from "../../clock.ts";
import { gpuNeed, startsWorkers, type Config, type EndpointConfig } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import type { ScaleUpHold } from "../../protocol/job-response.ts";
import { join, resolve } from "node:path";
import { EXIT_REPLACE, EXIT_START_PERMANENT } from "../../protocol/exit-codes.ts";
import { afterCrash } from "../../process/crash-backoff.ts";
import { OPTIONS_ENV } from "../../protocol/worker-env.ts";
import { DUTIES_LEASE } from "../jobs/maintenance.ts";
import type { WorkerKeys } from "../keys/worker-keys.ts";
import { topics } from "../store/store-events.ts";
import type { Store } from "../store/store.ts";
import { fleetOf, othersKept } from "./fleet.ts";
import { GpuLocks, gpuLockDir } from "./gpu-locks.ts";
import { GpuPlacement, gpuEnv, type GpuGrant } from "./gpu-placement.ts";
import { floorWorkers, targetWorkers } from "./scale-decision.ts";
import type { ScalerView } from "./scaler-view.ts";
import type { StartFailures } from "./start-failures.ts";
import { newWorkerId } from "./worker-id.ts";
import type { WorkerLogBook } from "./worker-log-book.ts";
import type { WorkerHandle, WorkerProvider } from "./worker-provider.ts";

/** An endpoint's own folder under the data dir: its workers' SPOOL_DATA_DIR (models, caches), the only part of the data dir they see in a sandbox. */
export const endpointScratchDir = (dataDir: string, endpointId: string): string => join(resolve(dataDir), "endpoints", endpointId);
/** What the scaler is built from. */
export interface ScalerDeps {
  store: Store;
  config: Config;
  clock: Clock;
  log: Log;
  /** The keys of the workers it starts (held in memory, never stored). */
  workerKeys: WorkerKeys;
  /** Where its workers' failed starts are kept; a worker that reaches the server ends its endpoint's run. */
  startFailures?: StartFailures;
  /** Where each worker's start and exit are written for the dashboard. */
  workerLog?: WorkerLogBook;
  /** Told of every worker it starts (up) and every idle one it stops (down). */
  metrics?: { scaled(endpointId: string, direction: "up" | "down"): void };
}

interface Managed {
  endpointId: string;
  handle: WorkerHandle;
  startedAt: number;
  stopping: boolean;
  /** Heard from: it has reached the server at least once. */
  seen: boolean;
  /** Ended for not being ready by its endpoint's startTimeoutMs: its exit is a failed start all the same. */
  timedOut?: boolean;
}

const isEnding = (w: Managed): boolean => w.stopping || (w.handle.overdue?.() ?? false);

interface EndpointState {
  workers: Map<string, Managed>;
  crashes: number;
  notBefore: number;
  /** Workers wanted that wait for a free GPU (logged once per wait). */
  held?: ScaleUpHold;
}

/**
 * Starts and stops workers for every endpoint that names a handler and whose provider is local
 * (an external one's workers come and go on their own): up to the target of its
 * scaler settings, down to its floor once workers have been idle for idleTimeout. A worker that
 * crashes is forgotten by the store (its jobs follow the worker-loss rule) and replaced with
 * backoff.
 */
export class Scaler implements ScalerView {
  readonly #deps: ScalerDeps;
  readonly #provider: WorkerProvider;
  readonly #endpoints = new Map<string, EndpointState>();
  readonly #stopped = new AbortController();
  #origin: string | undefined;
  #loop?: Promise<void>;

  readonly #serverId: string;
  readonly #gpus: GpuPlacement;

  constructor(deps: ScalerDeps, provider: WorkerProvider, serverId: string) {
    this.#deps = deps;
    this.#serverId = serverId;
    this.#provider = provider;
    // Known since config load, which refused any endpoint whose worker can never be placed.
    // Locked per card, so that other servers on this host never place a worker on the same one.
    this.#gpus = new GpuPlacement(deps.config.server.gpus, new GpuLocks(() => gpuLockDir(deps.config.server), deps.log));
    for (const [id, ep] of Object.entries(deps.config.endpoints)) {
      if (startsWorkers(deps.config, ep)) this.#endpoints.set(id, { workers: new Map(), crashes: 0, notBefore: 0 });
    }
  }

  get endpoints(): string[] {
    return [...this.#endpoints.keys()];
  }

  readonly #byId = new Map<string, Managed>();

  /** Workers started for the endpoint and not yet heard from. */
  initializing(endpointId: string): number {
    const state = this.#endpoints.get(endpointId);
    return state ? [...state.workers.values()].filter((w) => !w.stopping && !w.seen).length : 0;
  }

  /** A worker is known to have reached a server: it is no longer initializing. */
  seen(workerId: string): void {
    const w = this.#byId.get(workerId);
    if (w) w.seen = true;
  }

  reached(workerId: string, endpointId: string): void {
    this.seen(workerId);
    this.#deps.startFailures?.ready(endpointId);
  }

  get origin(): string | undefined {
    return this.#origin;
  }

  /** The server listens at `url`: the origin its own workers are told to call. */
  listening(url: string): void {
    this.#origin = url;
  }

  /** Worker processes being ended (stopped, or past a job's deadline) that have not exited. */
  stopping(endpointId: string): number {
    const state = this.#endpoints.get(endpointId);
    return state ? [...state.workers.values()].filter(isEnding).length : 0;
  }

  /** Why the endpoint has fewer workers than it wants (no GPU free); undefined when it has them. */
  held(endpointId: string): ScaleUpHold | undefined {
    return this.#endpoints.get(endpointId)?.held;
  }

  /** Workers the scaler runs for the endpoint now (not counting ones being stopped). */
  running(endpointId: string): string[] {
    const state = this.#endpoints.get(endpointId);
    return state ? [...state.workers].filter(([, w]) => !w.stopping).map(([id]) => id) : [];
  }

  /** Starts scaling: workers reach the server at the origin it listens on, each with a key of its own. */
  start(): void {
    const { clock, config, log, store } = this.#deps;
    // A job queued on a scaled endpoint wakes the scaler at once: a cold start does not wait
    // for the next tick.
    let queued = false;
    let wake = new AbortController();
    const offs = this.endpoints.map((ep) =>
      store.events.on(topics.queue(ep), () => {
        queued = true;
        wake.abort();
      }),
    );
    this.#loop = (async () => {
      while (!this.#stopped.signal.aborted) {
        queued = false;
        try {
          await this.#leaderTick();
        } catch (err) {
          log.error("scaler tick failed", { error: String(err) });
        }
        if (queued) continue;
        wake = new AbortController();
        await clock.sleep(config.server.scaleIntervalMs, AbortSignal.any([this.#stopped.signal, wake.signal]));
      }
      for (const off of offs) off();
    })();
  }

  /** One scaling decision for every managed endpoint. */
  async tick(): Promise<void> {
    for (const [id, state] of this.#endpoints) await this.#scale(id, this.#deps.config.endpoints[id]!, state);
  }

  /**
   * A tick on the server that holds the duties lease (several servers, one store); the others
   * only stop their own idle workers (retireIdle), which no other server can stop.
   */
  async #leaderTick(): Promise<void> {
    const { store, clock, config } = this.#deps;
    const leaseMs = Math.max(300, 3 * Math.max(config.server.sweepIntervalMs, config.server.scaleIntervalMs));
    if (await store.tryLease(DUTIES_LEASE, this.#serverId, leaseMs, clock.now())) await this.tick();
    else await this.retireIdle();
  }

  /** Stops this server's own idle workers past idleTimeout while the endpoint's fleet is above its floor; starts none. */
  async retireIdle(): Promise<void> {
    for (const [id, state] of this.#endpoints) await this.#scale(id, this.#deps.config.endpoints[id]!, state, false);
  }

  async #scale(endpointId: string, config: EndpointConfig, state: EndpointState, holder = true): Promise<void> {
    const { store, clock, log } = this.#deps;
    const now = clock.now();
    const stats = await store.scalingStats(endpointId, now, this.#deps.config.server.workerLossTimeoutMs);
    const seen = new Map(stats.workers.map((w) => [w.id, w]));
    for (const id of seen.keys()) this.seen(id);
    this.#endSlowStarts(endpointId, config, state, now);
    const live = [...state.workers].filter(([, w]) => !w.stopping);
    // The whole fleet, from the store: workers other servers started count against workersMax.
    const { current, initializing } = fleetOf(state.workers, stats);
    const input = { config, stats, current, initializing, now };

    // While its workers fail to start (its jobs failed, submissions refused), keep trying one.
    const target = Math.max(targetWorkers(input), this.#deps.startFailures?.retrying(endpointId) ? 1 : 0);
    if (!holder) state.held = undefined;
    if (target > current) {
      if (holder && now >= state.notBefore) {
        // This server's processes count until they have exited, stopping or not: the fleet never
        // passes workersMax while a stuck process is being ended.
        const stopping = state.workers.size - live.length;
        const room = Math.min(target - current, config.workersMax - current - stopping);
        let started = 0;
        while (started < room && this.#startWorker(endpointId, config, state)) started++;
        this.#hold(endpointId, config, state, room - started);
      }
      return;
    }
    state.held = undefined;

    // Scale down: idle workers past idleTimeout, oldest idle first, never below the floor.
    const floor = floorWorkers(input);
    const idleMs = config.idleTimeout * 1000;
    const idle = live
      .map(([id, w]) => ({ id, w, since: Math.max(w.startedAt, seen.get(id)?.lastActive ?? 0), info: seen.get(id) }))
      .filter((x) => x.info && x.info.running === 0 && !x.w.handle.overdue?.() && now - x.since >= idleMs)
      .sort((a, b) => a.since - b.since);
    let count = holder ? current : live.length + othersKept(state.workers, stats, idleMs, now);
    for (const x of idle) {
      if (count <= floor) break;
      x.w.stopping = true;
      x.w.handle.stop();
      count--;
      log.info("stopping idle worker", { endpointId, workerId: x.id });
      this.#deps.metrics?.scaled(endpointId, "down");
    }
  }

  /** Records (and logs once per wait) the workers a scale-up could not start for want of a GPU. */
  #hold(endpointId: string, config: EndpointConfig, state: EndpointState, workers: number): void {
    if (workers <= 0) {
      state.held = undefined;
      return;
    }
    const need = gpuNeed(config);
    const each = `${need.gpus} GPU${need.gpus > 1 ? "s" : ""}${need.memoryMb ? ` with ${need.memoryMb} MiB` : ""}`;
    const elsewhere = this.#gpus.heldElsewhere;
    const others = elsewhere ? ` (${elsewhere} in use by another server on this host)` : "";
    const message = `${workers} worker${workers > 1 ? "s wait" : " waits"} for a free GPU: each needs ${each}, and none of the ${this.#gpus.devices.length} GPUs here has room${others}`;
    if (!state.held)
      this.#deps.log.warn("scale-up waits for a free GPU", {
        endpointId,
        workers,
        ...need,
        gpus: this.#gpus.devices.length,
        free: this.#gpus.free,
        elsewhere,
      });
    state.held = { reason: "gpu", workers, message };
  }

  /** Starts one worker; false when it must wait for a free GPU. */
  #startWorker(endpointId: string, config: EndpointConfig, state: EndpointState): boolean {
    const { clock, log, store } = this.#deps;
    const need = gpuNeed(config);
    const grant: GpuGrant | undefined = need.gpus > 0 ? this.#gpus.take(need) : { ids: [] };
    if (!grant) return false;
    const gpus = grant.ids;
    const workerId = newWorkerId(endpointId);
    const keys = this.#deps.workerKeys;
    // A provider that throws started nothing: its GPUs go back as the scope ends.
    using unstarted = this.#gpus.returnUnlessKept(grant);
    const handle = this.#provider.start({
      endpointId,
      workerId,
      handler: config.handler!,
      serverUrl: this.#origin ?? "",
      apiKey: keys.issue(endpointId, workerId, clock.now()),
      env: {
        [OPTIONS_ENV]: JSON.stringify(config.options),
        ...(need.gpus > 0 ? gpuEnv(gpus) : {}),
      },
      endpointEnv: config.env,
      scratchDir: endpointScratchDir(this.#deps.config.server.data, endpointId),
      usesGpus: need.gpus > 0,
    });
    unstarted.keep();
    const managed: Managed = { endpointId, handle, startedAt: clock.now(), stopping: false, seen: false };
    state.workers.set(workerId, managed);
    this.#byId.set(workerId, managed);
    log.info("started worker", { endpointId, workerId, ...(need.gpus > 0 ? { gpus } : {}) });
    this.#deps.workerLog?.add(endpointId, workerId, `started${need.gpus > 0 ? ` on GPUs ${gpus.join(", ")}` : ""}`, clock.now());
    this.#deps.metrics?.scaled(endpointId, "up");
    void handle.exited.then(async (code) => {
      // Its GPUs are free at once, not after the store has answered (which may take long).
      this.#gpus.release(grant);
      const signal = handle.exitDetail?.().signal;
      this.#deps.workerLog?.add(
        endpointId,
        workerId,
        `exited with ${signal ? `signal ${signal}` : `code ${code}`}${managed.stopping ? " (stopped)" : ""}`,
        clock.now(),
      );
      // The process is gone: health stops counting it, and its jobs (if any) need not wait out
      // the heartbeat timeout before the worker-loss rule applies. Forgotten by the store first,
      // so health never counts it idle in between; a store that cannot answer now only delays
      // this (the heartbeat timeout covers the worker).
      keys.revoke(workerId);
      await store
        .forgetWorker(workerId)
        .catch((err) => log.warn("could not forget an ended worker", { endpointId, workerId, error: String(err) }));
      state.workers.delete(workerId);
      this.#byId.delete(workerId);
      if ((managed.stopping && !managed.timedOut) || this.#stopped.signal.aborted) return;
      if (code === EXIT_REPLACE) {
        log.info("worker asked to be replaced", { endpointId, workerId });
        return;
      }
      const { crashes, waitMs: backoff } = afterCrash(state.crashes, clock.now() - managed.startedAt);
      state.crashes = crashes;
      state.notBefore = clock.now() + backoff;
      if (managed.seen) log.warn("worker crashed; replacing it after backoff", { endpointId, workerId, code, backoffMs: backoff });
      else await this.#startFailed(endpointId, workerId, managed, code, backoff);
    });
    return true;
  }

  /**
   * Ends the endpoint's own workers not ready by its startTimeoutMs (a setup stalled on a dead
   * socket, say). Each keeps its place against workersMax until its process has exited; its exit
   * then frees its GPUs and counts as a failed start.
   */
  #endSlowStarts(endpointId: string, config: EndpointConfig, state: EndpointState, now: number): void {
    for (const [workerId, w] of state.workers) {
      if (w.seen || w.stopping || now - w.startedAt < config.startTimeoutMs) continue;
      w.stopping = true;
      w.timedOut = true;
      this.#deps.log.warn("worker not ready by its start deadline; ending it", {
        endpointId,
        workerId,
        startTimeoutMs: config.startTimeoutMs,
      });
      w.handle.kill();
    }
  }

  /** A worker that never became ready has exited: a failed start, permanent when its handler cannot load. */
  async #startFailed(endpointId: string, workerId: string, w: Managed, code: number, retryInMs: number): Promise<void> {
    const timedOutMs = w.timedOut ? this.#deps.config.endpoints[endpointId]!.startTimeoutMs : undefined;
    const exit = { code, ...(w.handle.exitDetail?.() ?? { output: "" }), timedOutMs };
    // 127: the provider could not run the handler binary at all (missing, not executable), as a shell says.
    const permanent = !w.timedOut && (code === EXIT_START_PERMANENT || code === 127);
    await this.#deps.startFailures?.failed(endpointId, workerId, exit, retryInMs, permanent);
  }

  /** Ends every worker process at once, draining none: the server is exiting now. */
  kill(): void {
    this.#stopped.abort();
    for (const state of this.#endpoints.values()) for (const w of state.workers.values()) w.handle.kill();
  }

  /**
   * Stops scaling and every worker: each drains (the drain time it announced) and is killed
   * after the kill grace; `graceMs`, when given, kills at that time instead.
   */
  async stop(graceMs?: number): Promise<void> {
    this.#stopped.abort();
    await this.#loop;
    const all = [...this.#endpoints.values()].flatMap((s) => [...s.workers.values()]);
    for (const w of all) {
      w.stopping = true;
      w.handle.stop(graceMs);
    }
    await Promise.all(all.map((w) => w.handle.exited));
  }
}
