import type { Config } from "../../config/config.ts";
import { RedisStore } from "./redis/redis-store.ts";
import type { Store, StoreOptions } from "./store.ts";
import { SqliteStore } from "./sqlite/sqlite-store.ts";

const isRedis = (url: string) => /^rediss?:\/\//.test(url);

/**
 * Picks a backend by URL: `redis://host:port[/db][?prefix=NAME]` or `rediss://` (several servers
 * share it), else a directory (or `sqlite:DIR`) for the embedded store.
 */
export async function createStore(url: string, options: StoreOptions): Promise<Store> {
  if (!isRedis(url)) return openEmbeddedStore(url, options);
  // ?prefix=NAME namespaces the keys, so several Spool deployments can share one Redis.
  const parsed = new URL(url);
  const prefix = parsed.searchParams.get("prefix");
  parsed.searchParams.delete("prefix");
  return RedisStore.connect(parsed.toString(), options, prefix ? `{${prefix}}:` : undefined);
}

/** The embedded SQLite store in a directory; no connection to wait for. */
export function openEmbeddedStore(dir: string, options: StoreOptions): Store {
  if (isRedis(dir)) throw new Error(`${dir} is a Redis URL: open it with createStore and pass the store`);
  return SqliteStore.open(dir.startsWith("sqlite:") ? dir.slice("sqlite:".length) : dir, options);
}

/** The store a server configuration names: server.store, or the embedded store under server.data. */
export function storeUrl(config: Config): string {
  return config.server.store ?? config.server.data;
}

export function storeOptions(config: Config): StoreOptions {
  return { retention: { syncMs: config.server.syncRetentionMs, asyncMs: config.server.asyncRetentionMs } };
}
