import type { WorkerHandle, WorkerProvider, WorkerSpec } from "../../runtime/server/scaling/worker-provider.ts";

interface Started {
  spec: WorkerSpec;
  /** Ends the worker: its handle's `exited` resolves with `code`. */
  exit(code?: number): void;
  live: boolean;
  /** stop() or kill() was called. */
  stopAsked: boolean;
}

/**
 * Workers that are no processes: each start is recorded with the spec the scaler gave (its
 * environment above all), and a worker ends when stopped, or only when the test ends it
 * (`stubborn`: a process that will not die). `throwOnStart` makes that many starts throw.
 */
export class RecordingProvider implements WorkerProvider {
  readonly started: Started[] = [];
  throwOnStart = 0;

  constructor(private readonly options: { stubborn?: boolean } = {}) {}

  start(spec: WorkerSpec): WorkerHandle {
    if (this.throwOnStart > 0) {
      this.throwOnStart--;
      throw new Error("the provider cannot start workers now");
    }
    const { promise: exited, resolve } = Promise.withResolvers<number>();
    const worker: Started = { spec, exit: (code = 0) => resolve(code), live: true, stopAsked: false };
    void exited.then(() => (worker.live = false));
    this.started.push(worker);
    const end = (code: number) => {
      worker.stopAsked = true;
      if (!this.options.stubborn) resolve(code);
    };
    return { workerId: spec.workerId, exited, stop: () => end(143), kill: () => end(137) };
  }

  /** CUDA_VISIBLE_DEVICES of each worker still alive, in start order. */
  liveGpus(): string[] {
    return this.started.filter((w) => w.live).map((w) => w.spec.env.CUDA_VISIBLE_DEVICES ?? "");
  }
}
