import type { ApiKeyRecord, KeyScope, Store } from "../store/store.ts";

/** SHA-256 hex of a key: keys are 256-bit random, so a fast hash is the right one. */
export function hashKey(key: string): string {
  return new Bun.CryptoHasher("sha256").update(key).digest("hex");
}

/** Creates a key, stores only its hash, and returns the key (shown once). */
export async function createKey(
  store: Store,
  name: string,
  now: number,
  access: { scope?: KeyScope; endpoints?: string[] } = {},
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = `spool_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url")}`;
  const record: ApiKeyRecord = {
    id: `key_${crypto.randomUUID().slice(0, 8)}`,
    name,
    hash: hashKey(key),
    createdAt: now,
    scope: access.scope ?? "full",
    ...(access.endpoints?.length ? { endpoints: access.endpoints } : {}),
  };
  await store.addKey(record);
  return { key, record };
}

/** The Authorization header's key: `Bearer KEY` or the bare key (runpod-python sends it bare). */
export function keyFromHeader(header: string | undefined): string | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  const bearer = /^Bearer\s+(.+)$/i.exec(value);
  return (bearer ? bearer[1]! : value).trim() || undefined;
}
