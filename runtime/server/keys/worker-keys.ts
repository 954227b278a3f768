import type { ApiKeyRecord } from "../store/store.ts";

/** Key ids of worker keys: `worker:<worker id>`, so a route can tell whose key it is without a lookup. */
export const WORKER_KEY_PREFIX = "worker:";

/** Whether `keyId` belongs to one worker only, and that worker is not `workerId`. */
export const boundToAnotherWorker = (keyId: string, workerId: string): boolean =>
  keyId.startsWith(WORKER_KEY_PREFIX) && keyId !== `${WORKER_KEY_PREFIX}${workerId}`;

/**
 * The keys of the workers this server starts: one per worker, valid only on its endpoint's
 * worker routes and for its own worker id, and only while the worker runs. They live in this
 * server's memory and are never stored, so none outlives the server (a server killed with
 * SIGKILL leaves no key behind); the worker calls this server and no other.
 */
export class WorkerKeys {
  readonly #byKey = new Map<string, ApiKeyRecord>();
  readonly #byWorker = new Map<string, string>();

  /** A new key for the worker, valid until revoke(workerId). */
  issue(endpointId: string, workerId: string, now: number): string {
    const key = `spoolw_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url")}`;
    this.#byKey.set(key, {
      id: `${WORKER_KEY_PREFIX}${workerId}`,
      name: `worker ${workerId}`,
      hash: "",
      createdAt: now,
      scope: "worker",
      endpoints: [endpointId],
    });
    this.#byWorker.set(workerId, key);
    return key;
  }

  /** The worker's key stops working at once. */
  revoke(workerId: string): void {
    const key = this.#byWorker.get(workerId);
    if (key === undefined) return;
    this.#byWorker.delete(workerId);
    this.#byKey.delete(key);
  }

  /** The record of a live worker's key; undefined for any other key. */
  find(key: string): ApiKeyRecord | undefined {
    return this.#byKey.get(key);
  }

  /** Keys in force (workers running). */
  get size(): number {
    return this.#byKey.size;
  }
}
