import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { RefusedError } from "./refused.ts";

const DNS_TIMEOUT_MS = 3_000;

const V4_PRIVATE: [number, number][] = [
  [0x00000000, 8], // 0.0.0.0/8
  [0x0a000000, 8], // 10/8
  [0x64400000, 10], // 100.64/10 (carrier-grade NAT)
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local (and cloud metadata)
  [0xac100000, 12], // 172.16/12
  [0xc0a80000, 16], // 192.168/16
  [0xc0000000, 24], // 192.0.0/24 (protocol assignments)
  [0xc6120000, 15], // 198.18/15 (benchmarking)
  [0xe0000000, 3], // multicast and reserved
];

function v4(ip: string): number {
  return ip.split(".").reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
}

/** The 8 groups of an IPv6 address (dotted IPv4 tails included), or null when it is not one. */
function v6Groups(ip: string): number[] | null {
  let text = ip.toLowerCase().split("%")[0]!;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4(dotted[1]!);
    text = text.slice(0, -dotted[1]!.length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - head.length - tail.length;
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return null;
  const groups = [...head, ...Array(missing).fill("0"), ...tail].map((g) => parseInt(g, 16));
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/**
 * True for loopback, private, link-local, CGNAT, unspecified, multicast and reserved addresses,
 * in any spelling: IPv4, IPv6, and IPv4 inside IPv6 (mapped ::ffff:a.b.c.d or ::ffff:7f00:1,
 * compatible ::a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::), the embedded IPv4
 * address judged by the IPv4 list: a public one behind NAT64 (DNS64 networks) stays callable.
 */
export function isPrivateAddress(ip: string): boolean {
  if (isIP(ip) === 4) {
    const n = v4(ip);
    return V4_PRIVATE.some(([base, bits]) => n >>> (32 - bits) === base >>> (32 - bits));
  }
  const g = v6Groups(ip);
  if (!g) return true; // unparseable: refuse
  const embedded = `${g[6]! >>> 8}.${g[6]! & 0xff}.${g[7]! >>> 8}.${g[7]! & 0xff}`;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return isPrivateAddress(embedded); // mapped
  if (zeros(0, 6)) return true; // ::, ::1 and IPv4-compatible (deprecated): never a public host
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return isPrivateAddress(embedded); // NAT64
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return true; // local-use NAT64 (64:ff9b:1::/48): any address of its network
  if (g[0] === 0x2002) return isPrivateAddress(`${g[1]! >>> 8}.${g[1]! & 0xff}.${g[2]! >>> 8}.${g[2]! & 0xff}`); // 6to4
  return (g[0]! & 0xfe00) === 0xfc00 || (g[0]! & 0xffc0) === 0xfe80 || (g[0]! & 0xff00) === 0xff00;
}

/** Looks a host name up: every address it has now. */
export type Resolver = (host: string) => Promise<{ address: string }[]>;
export const systemResolver: Resolver = (host) => lookup(host, { all: true });

/** True when `ip` is in the CIDR `range` (a.b.c.d/n or an IPv6 range; a bare address is /32 or /128). */
function inRange(ip: string, range: string): boolean {
  const [base, bitsText] = range.split("/");
  if (!base || isIP(base) === 0 || isIP(base) !== isIP(ip)) return false;
  const width = isIP(ip) === 4 ? 32 : 128;
  const bits = bitsText === undefined ? width : Number(bitsText);
  const value = (a: string) => (isIP(a) === 4 ? BigInt(v4(a)) : (v6Groups(a) ?? []).reduce((n, g) => (n << 16n) | BigInt(g), 0n));
  const shift = BigInt(width - bits);
  return value(ip) >> shift === value(base) >> shift;
}

/** Where a webhook call may go: the one address to connect to, or why it is refused. */
export type WebhookTarget = { address: string } | { refused: string };

/**
 * Resolves the URL's host once and picks the address to call: refused when any address it has is
 * loopback, private, link-local or reserved, unless the host name or every such address is in
 * `allow` (CIDRs or host names). The call then goes to this address, so a name that answers
 * differently the next time (DNS rebinding) cannot turn it inward.
 */
export async function webhookTarget(url: string, allow: readonly string[], resolve: Resolver = systemResolver): Promise<WebhookTarget> {
  // A trailing dot names the same host (localhost. is localhost).
  const host = new URL(url).hostname
    .replace(/^\[|\]$/g, "")
    .replace(/\.+$/, "")
    .toLowerCase();
  const named = allow.some((entry) => entry.toLowerCase() === host);
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else if (!named && (host === "localhost" || host.endsWith(".localhost"))) return { refused: "loopback host name" };
  else {
    try {
      // Bounded, so a slow resolver cannot hold a webhook call past its lease.
      const found = await Promise.race([
        resolve(host),
        Bun.sleep(DNS_TIMEOUT_MS).then(() => Promise.reject(new Error("DNS lookup timed out"))),
      ]);
      addresses = found.map((a) => a.address);
    } catch (err) {
      return { refused: `cannot resolve ${host}: ${(err as Error).message}` };
    }
  }
  if (addresses.length === 0) return { refused: `${host} has no address` };
  const inward = addresses.find((a) => isPrivateAddress(a) && !named && !allow.some((r) => inRange(a, r)));
  if (inward) return { refused: `${host} resolves to ${inward}, a private, loopback or link-local address not in webhookAllow` };
  return { address: addresses[0]! };
}

/** The request that reaches `address` for `url`: the same path, with the name's Host and TLS name. */
export function pinnedRequest(url: string, address: string): { url: string; host: string; serverName: string } {
  const u = new URL(url);
  const host = u.host;
  const serverName = u.hostname.replace(/^\[|\]$/g, "");
  u.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return { url: u.toString(), host, serverName };
}

/** 400 for a webhook this server would refuse to call. */
export async function refusePrivateWebhook(url: string, allow: readonly string[], resolve?: Resolver): Promise<void> {
  const target = await webhookTarget(url, allow, resolve);
  if ("refused" in target && !target.refused.startsWith("cannot resolve")) {
    throw new RefusedError(
      "invalid",
      "invalid job request: webhook: private, loopback and link-local addresses are not allowed on this server",
    );
  }
}
