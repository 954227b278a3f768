import { isIP } from "node:net";
import { z } from "zod";

/** An allowedHosts entry split as a request's URL spells its host: `name` lower-case, `port` undefined when none was given. */
export interface HostEntry {
  name: string;
  port?: string;
}

/**
 * Parses `name`, `name:port`, `[v6]` or `[v6]:port` as a URL's host would be read (lower-case,
 * punycode, IPv4 and IPv6 in their short form); undefined when it is not a host.
 */
export function parseHostEntry(text: string): HostEntry | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:/?#@\s[\]]+)(?::(\d{1,5}))?$/.exec(text);
  if (!m || (m[2] !== undefined && Number(m[2]) > 65535)) return undefined;
  try {
    const name = new URL(`http://${m[1]}`).hostname;
    return name ? { name, port: m[2] === undefined ? undefined : String(Number(m[2])) } : undefined;
  } catch {
    return undefined;
  }
}

/** An IP address or CIDR range, as node:net's BlockList takes it. */
export interface AddressRange {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** Parses `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or an IPv6 `addr/n`; undefined when it is none of those. */
export function parseAddressRange(text: string): AddressRange | undefined {
  const [address = "", bits, extra] = text.split("/");
  const version = isIP(address);
  if (version === 0 || extra !== undefined) return undefined;
  const width = version === 4 ? 32 : 128;
  if (bits !== undefined && !/^\d{1,3}$/.test(bits)) return undefined;
  const prefix = bits === undefined ? width : Number(bits);
  if (prefix > width) return undefined;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

/** server.allowedHosts: `*`, a name or address, or host:port. */
export const allowedHostsSchema = z
  .array(
    z.string().refine((h) => h === "*" || parseHostEntry(h) !== undefined, {
      error: (issue) => `"${String(issue.input)}" is not a host name, an address or host:port (an IPv6 address in brackets)`,
    }),
  )
  .default([]);

/** server.trustedProxies: IP addresses and CIDR ranges. */
export const trustedProxiesSchema = z
  .array(
    z.string().refine((r) => parseAddressRange(r) !== undefined, {
      error: (issue) => `"${String(issue.input)}" is not an IP address or CIDR range (10.0.0.0/8, fd00::/8)`,
    }),
  )
  .default([]);
