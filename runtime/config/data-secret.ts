import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A secret kept in a file of the data directory (mode 0600), made by `make` on first use. */
export function dataSecret(dataDir: string, name: string, make: () => string): string {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, name);
  if (!existsSync(path)) writeFileSync(path, make(), { mode: 0o600 });
  return readFileSync(path, "utf8").trim();
}

export const randomBase64 = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64");
