import type { Clock } from "../../clock.ts";
import { topics, type StoreEvents } from "../store/store-events.ts";
import type { MaybePromise } from "../../maybe-promise.ts";
import type { ApiKeyRecord, Store } from "../store/store.ts";
import { hashKey } from "./api-keys.ts";

/** How long a key lookup is trusted without asking the store again. */
const TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;

/**
 * Key lookups remembered for a few seconds, so a request does not hash and fetch its key every
 * time. A revocation announced by the store (in this process, or by any server on Redis) clears
 * the cache at once; one made by another process on the embedded store takes effect within 5 s.
 */
export class KeyCache {
  readonly #entries = new Map<string, { record: ApiKeyRecord | null; until: number }>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    events: StoreEvents,
  ) {
    events.on(topics.keys, () => this.#entries.clear());
  }

  /** The key's record (null: unknown), at once when remembered. */
  find(key: string): MaybePromise<ApiKeyRecord | null> {
    const now = this.clock.now();
    const hit = this.#entries.get(key);
    if (hit && hit.until > now) return hit.record;
    return this.#fetch(key, now);
  }

  async #fetch(key: string, now: number): Promise<ApiKeyRecord | null> {
    const record = await this.store.findKey(hashKey(key));
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.clear();
    this.#entries.set(key, { record, until: now + TTL_MS });
    return record;
  }
}
