import type { Api } from "./api.ts";

/** A job event of the dashboard's stream: a job of an endpoint the key may see changed. */
export interface DashboardEvent {
  type: "submitted" | "taken" | "ended" | "refused";
  endpointId: string;
  job?: { id: string; status: string; delayTime?: number; executionTime?: number; workerId?: string; createdAt?: string; sync?: boolean };
  reason?: string;
}

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
        .follow("/dashboard/api/events", (e) => {
          if (e.event === "ready") this.#setConnected(true);
          if (e.event !== "job") return;
          const event = JSON.parse(e.data) as DashboardEvent;
          for (const l of this.#listeners) l(event);
        }, this.#stop.signal)
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
