import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { HttpError } from "../http-error.ts";

const V4_PRIVATE: [number, number][] = [
  [0x00000000, 8], // 0.0.0.0/8
  [0x0a000000, 8], // 10/8
  [0x64400000, 10], // 100.64/10 (carrier-grade NAT)
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local (and cloud metadata)
  [0xac100000, 12], // 172.16/12
  [0xc0a80000, 16], // 192.168/16
  [0xe0000000, 3], // multicast and reserved
];

function v4(ip: string): number {
  return ip.split(".").reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
}

/** True for loopback, private, link-local, CGNAT, unspecified, multicast and reserved addresses. */
export function isPrivateAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return isPrivateAddress(mapped[1]!);
  if (isIP(ip) === 4) {
    const n = v4(ip);
    return V4_PRIVATE.some(([base, bits]) => (n >>> (32 - bits)) === (base >>> (32 - bits)));
  }
  const lower = ip.toLowerCase();
  return lower === "::" || lower === "::1" || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower) || /^ff/.test(lower);
}

/** Resolves the URL's host and says whether any of its addresses is private. */
export async function resolvesPrivate(url: string): Promise<boolean> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) return isPrivateAddress(host);
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  try {
    const addresses = await lookup(host, { all: true });
    return addresses.some((a) => isPrivateAddress(a.address));
  } catch {
    return false; // unresolvable now: delivery will fail and be retried like any network error
  }
}

/** 400 for a webhook on a private or loopback address (when the server refuses those). */
export async function refusePrivateWebhook(url: string): Promise<void> {
  if (await resolvesPrivate(url)) {
    throw new HttpError(400, "invalid job request: webhook: private, loopback and link-local addresses are not allowed on this server");
  }
}
