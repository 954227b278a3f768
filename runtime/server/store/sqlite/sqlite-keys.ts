import { topics } from "../store-events.ts";
import type { ApiKeyRecord } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";
import { opt } from "./sqlite-job-row.ts";

interface KeyRow {
  id: string;
  name: string;
  hash: string;
  created_at: number;
  revoked_at: number | null;
  scope: string;
  endpoints: string | null;
}

const toKey = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  name: r.name,
  hash: r.hash,
  createdAt: r.created_at,
  revokedAt: opt(r.revoked_at),
  scope: r.scope as ApiKeyRecord["scope"],
  endpoints: r.endpoints === null ? undefined : JSON.parse(r.endpoints),
});

/** API keys on the embedded store; `revoke` runs inside the store's transaction. */
export const apiKeys = {
  add(s: SqliteContext, key: ApiKeyRecord): void {
    s.db
      .query("INSERT INTO api_keys (id, name, hash, created_at, revoked_at, scope, endpoints) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run(
        key.id,
        key.name,
        key.hash,
        key.createdAt,
        key.revokedAt ?? null,
        key.scope,
        key.endpoints ? JSON.stringify(key.endpoints) : null,
      );
  },

  find(s: SqliteContext, hash: string): ApiKeyRecord | null {
    const r = s.db.query<KeyRow, [string]>("SELECT * FROM api_keys WHERE hash = ?").get(hash);
    return r && toKey(r);
  },

  list(s: SqliteContext): ApiKeyRecord[] {
    return s.db.query<KeyRow, []>("SELECT * FROM api_keys ORDER BY created_at, rowid").all().map(toKey);
  },

  revoke(s: SqliteContext, idOrName: string, now: number, announce: Announce): boolean {
    const changed = s.db
      .query("UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR name = ?) AND revoked_at IS NULL")
      .run(now, idOrName, idOrName).changes;
    if (changed) announce(topics.keys);
    return changed > 0;
  },
};
