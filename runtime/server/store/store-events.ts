/** Topics a store announces after a change has been committed. */
export const topics = {
  /** A job became available to take on this endpoint. */
  queue: (endpointId: string) => `queue:${endpointId}`,
  /** A job changed: progress, a stream chunk, or a new state. */
  job: (jobId: string) => `job:${jobId}`,
  /** A worker has jobs to stop. */
  stop: (workerId: string) => `stop:${workerId}`,
  /** A webhook call became due. */
  webhooks: "webhooks",
  /** An API key was revoked: cached key lookups are stale. */
  keys: "keys",
  /** An endpoint's run of failed worker starts grew or ended: cached runs are stale. */
  startFailures: "start-failures",
};

/** Wake-ups for long-polls. In one process an emitter; across servers, a backend's pub/sub. */
export interface StoreEvents {
  on(topic: string, listener: () => void): () => void;
  emit(topic: string): void;
  /**
   * How long a long-poll may sleep before it looks again without a wake-up, where announcements
   * can be lost (Redis pub/sub across a reconnection); undefined: never lost.
   */
  readonly recheckMs?: number;
}

/** In-process events: enough when one server owns the store. */
export class LocalEvents implements StoreEvents {
  #listeners = new Map<string, Set<() => void>>();

  on(topic: string, listener: () => void): () => void {
    let set = this.#listeners.get(topic);
    if (!set) this.#listeners.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(topic);
    };
  }

  /** Wakes every listener of every topic (announcements may have been missed: all look again). */
  emitAll(): void {
    for (const set of [...this.#listeners.values()]) for (const listener of [...set]) listener();
  }

  emit(topic: string): void {
    // Nobody waiting (the common case for a job topic): one map lookup, no allocation.
    const set = this.#listeners.get(topic);
    if (!set) return;
    for (const listener of [...set]) listener();
  }
}
