import { LocalProcessProvider } from "../../runtime/server/scaling/local-process-provider.ts";
import type { WorkerHandle, WorkerProvider, WorkerSpec } from "../../runtime/server/scaling/worker-provider.ts";

/**
 * Local worker processes that start only once the test opens the gate: until then every worker
 * the scaler started stays "initializing" (it cannot have reached the server), whatever the
 * machine's load. Open from the start unless `closed`.
 */
export class GatedProvider implements WorkerProvider {
  readonly #inner = new LocalProcessProvider();
  #open: boolean;
  #waiting = new Set<() => void>();

  constructor(options: { closed?: boolean } = {}) {
    this.#open = !options.closed;
  }

  start(spec: WorkerSpec): WorkerHandle {
    let inner: WorkerHandle | undefined;
    const { promise: exited, resolve } = Promise.withResolvers<number>();
    const launch = () => {
      this.#waiting.delete(launch);
      inner = this.#inner.start(spec);
      void inner.exited.then(resolve);
    };
    // Stopped or killed before its process started: it ends without ever starting.
    const end = (code: number) => {
      if (inner) return false;
      this.#waiting.delete(launch);
      resolve(code);
      return true;
    };
    if (this.#open) launch();
    else this.#waiting.add(launch);
    return {
      workerId: spec.workerId,
      exited,
      stop: (graceMs?: number) => void (end(143) || inner!.stop(graceMs)),
      kill: () => void (end(137) || inner!.kill()),
      exitDetail: () => inner?.exitDetail?.() ?? { output: "" },
    };
  }

  /** Starts the processes held so far, and any later one at once. */
  open(): void {
    this.#open = true;
    for (const launch of [...this.#waiting]) launch();
  }
}
