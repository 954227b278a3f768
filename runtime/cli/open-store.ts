import type { Config } from "../config/config.ts";
import { createStore } from "../server/store/create-store.ts";
import type { Store } from "../server/store/store.ts";

/** The store a CLI command works on, from the (already overridden) config. */
export function openStore(config: Config): Store {
  return createStore(config.server.data, {
    retention: { syncMs: config.server.syncRetentionMs, asyncMs: config.server.asyncRetentionMs },
  });
}
