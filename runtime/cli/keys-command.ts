import { systemClock } from "../clock.ts";
import { loadConfig } from "../config/config.ts";
import { createKey } from "../server/keys/api-keys.ts";
import { KEY_SCOPES, type KeyScope } from "../server/store/store.ts";
import { openStore } from "./open-store.ts";

/** `spool keys create|list|revoke [--data DIR] [--config FILE] [--name NAME] [ID|NAME]` */
export async function keysCommand(
  action: string | undefined,
  rest: string[],
  flags: { data?: string; config?: string; name?: string; scope?: string; endpoints?: string; store?: string },
): Promise<number> {
  // Only the store matters here: no GPU lookup, and a GPU endpoint is no error on this machine.
  const config = await loadConfig(flags.config, { serving: false });
  if (flags.data !== undefined) config.server.data = flags.data;
  if (flags.store !== undefined) config.server.store = flags.store;
  const store = await openStore(config);
  try {
    switch (action) {
      case "create": {
        const scope = (flags.scope ?? "full") as KeyScope;
        if (!KEY_SCOPES.includes(scope)) {
          console.error(`--scope must be one of ${KEY_SCOPES.join(", ")}, got ${scope}`);
          return 2;
        }
        const endpoints = flags.endpoints
          ?.split(",")
          .map((e) => e.trim())
          .filter(Boolean);
        const { key, record } = await createKey(store, flags.name ?? "default", systemClock.now(), { scope, endpoints });
        const limits = `${record.scope}${record.endpoints ? `, endpoints ${record.endpoints.join(",")}` : ""}`;
        console.log(`Created key ${record.id} (${record.name}; ${limits}). Store it now; it is not shown again:`);
        console.log(key);
        return 0;
      }
      case "list": {
        for (const k of await store.listKeys()) {
          const state = k.revokedAt ? `revoked ${new Date(k.revokedAt).toISOString()}` : "active";
          const endpoints = k.endpoints ? k.endpoints.join(",") : "*";
          console.log(`${k.id}\t${k.name}\t${k.scope}\t${endpoints}\t${new Date(k.createdAt).toISOString()}\t${state}`);
        }
        return 0;
      }
      case "revoke": {
        const target = rest[0];
        if (!target) {
          console.error("usage: spool keys revoke <key id or name>");
          return 2;
        }
        const ok = await store.revokeKey(target, systemClock.now());
        console.log(ok ? `revoked ${target}` : `no active key ${target}`);
        return ok ? 0 : 1;
      }
      default:
        console.error("usage: spool keys create|list|revoke [--data DIR] [--name NAME]");
        return 2;
    }
  } finally {
    await store.close();
  }
}
