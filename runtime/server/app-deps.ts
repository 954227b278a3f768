import type { Clock } from "../clock.ts";
import type { Config } from "../config/config.ts";
import type { Log } from "../log.ts";
import type { ApiKeyRecord, Store } from "./store/store.ts";

/** What the Hono app is built from; tests pass their own clock, config and store. */
export interface AppDeps {
  store: Store;
  config: Config;
  clock: Clock;
  log: Log;
}

/** Values the middleware puts on each request's context. */
export interface AppEnv {
  Variables: {
    requestId: string;
    key: ApiKeyRecord;
    endpointId: string;
  };
}
