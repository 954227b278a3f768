import type { Config } from "../../config/config.ts";
import { dataSecret, randomBase64 } from "../../config/data-secret.ts";

/** The server's Standard Webhooks secret: from config, else made once under the data dir. */
export function webhookSecret(config: Config): string {
  return config.server.webhookSecret ?? dataSecret(config.server.data, "webhook-secret", () => `whsec_${randomBase64(24)}`);
}

/**
 * Standard Webhooks headers for one attempt: webhook-id (the same on every attempt, so receivers
 * drop duplicates), webhook-timestamp (seconds) and webhook-signature, "v1," + base64 of
 * HMAC-SHA256 over "id.timestamp.body" keyed with the secret's base64-decoded bytes.
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signature = new Bun.CryptoHasher("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64");
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": `v1,${signature}`,
  };
}
