import type { Api } from "./api.ts";

import type { DashboardEvent } from "../../../protocol/dashboard-event.ts";

export type { DashboardEvent };

type Listener = (e: DashboardEvent) => void;

/**
 * One server-sent event stream for the whole page (/dashboard/api/events), shared by every view:
 * a browser opens at most six connections to a host, so views must not each hold their own.
 */
export class EventsHub {
  #listeners = new Set<Listener>();
  #stop = new AbortController();
  /** True while the stream is connected; views show it. */
  connected = false;
  onConnection?: (connected: boolean) => void;

  constructor(api: Api) {
    void this.#run(api);
  }

  async #run(api: Api): Promise<void> {
    while (!this.#stop.signal.aborted) {
      await api
        .follow(
          "/dashboard/api/events",
          (e) => {
            if (e.event === "ready") this.#setConnected(true);
            if (e.event !== "job") return;
            const event = JSON.parse(e.data) as DashboardEvent;
            for (const l of this.#listeners) l(event);
          },
          this.#stop.signal,
        )
        .catch(() => {});
      this.#setConnected(false);
      if (!this.#stop.signal.aborted) await new Promise((r) => setTimeout(r, 1000));
    }
  }

  #setConnected(value: boolean) {
    if (this.connected === value) return;
    this.connected = value;
    this.onConnection?.(value);
  }

  on(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(): void {
    this.#stop.abort();
  }
}
