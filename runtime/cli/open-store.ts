import type { Config } from "../config/config.ts";
import { createStore, storeOptions, storeUrl } from "../server/store/create-store.ts";
import type { Store } from "../server/store/store.ts";

/** The store a CLI command works on, from the (already overridden) config. */
export function openStore(config: Config): Promise<Store> {
  return createStore(storeUrl(config), storeOptions(config));
}
