import type { Api, EndpointInfo, KeyInfo } from "./api.ts";
import type { EventsHub } from "./events-hub.ts";

/** What the signed-in page knows: the key's client, what the key may do, and its endpoints. */
export interface Session {
  api: Api;
  key: KeyInfo;
  endpoints: EndpointInfo[];
  hub: EventsHub;
  /** Whether the key may change anything (cancel, retry, purge, run): not a read-only key. */
  canAct: boolean;
}
