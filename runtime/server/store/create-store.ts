import type { Store, StoreOptions } from "./store.ts";
import { SqliteStore } from "./sqlite-store.ts";

/**
 * Picks a backend by URL: a directory path or `sqlite:DIR` opens the embedded store;
 * `sqlite::memory:` an in-memory one (tests).
 */
export function createStore(url: string, options: StoreOptions): Store {
  if (/^redis(s)?:\/\//.test(url)) throw new Error(`the Redis backend is not available yet: ${url}`);
  const dir = url.startsWith("sqlite:") ? url.slice("sqlite:".length) : url;
  return SqliteStore.open(dir, options);
}
