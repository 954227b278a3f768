import { BlockList, isIP } from "node:net";
import type { ServerConfig } from "../../config/config.ts";
import { parseAddressRange, parseHostEntry } from "../../config/network-settings.ts";
import { jsonAnswer } from "./http-error.ts";
import type { Step } from "./pipeline.ts";

/** What Bun.serve passes a fetch handler beside the request: the peer's address comes from it. */
interface PeerSource {
  requestIP?(req: Request): { address: string; family: string } | null;
}

/** The host part of `name[:port]` (an IPv6 address keeps its brackets). */
function nameOf(authority: string): string {
  const colon = authority.lastIndexOf(":");
  return colon === -1 || colon < authority.lastIndexOf("]") ? authority : authority.slice(0, colon);
}

/** The first value of a header a chain of proxies may have appended to (`a, b`). */
function firstValue(value: string | null): string | undefined {
  if (value === null) return undefined;
  const comma = value.indexOf(",");
  return (comma === -1 ? value : value.slice(0, comma)).trim() || undefined;
}

const WILDCARD_ADDRESSES = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * The hosts this server answers for (server.allowedHosts and those always answered), and the
 * X-Forwarded-Host and X-Forwarded-Proto of trusted proxies. A request's host is the one its URL
 * names (Bun builds it from the Host header: lower-case, without the default port), so a request
 * for an allowed host costs one or two Set lookups.
 */
export class AllowedHosts {
  /** Names allowed with any port, or none. */
  readonly #names = new Set<string>();
  /** `name:port` allowed with that port only (`name` too for port 80, as a URL drops it). */
  readonly #hostPorts = new Set<string>();
  /** Listening on every address: any IP address is one of this machine's, or reaches it through a mapping. */
  readonly #anyAddress: boolean;
  readonly #any: boolean;
  readonly #proxies: BlockList | undefined;

  constructor(server: Pick<ServerConfig, "host" | "allowedHosts" | "trustedProxies" | "publicUrl">) {
    this.#anyAddress = WILDCARD_ADDRESSES.has(server.host);
    this.#any = server.allowedHosts.includes("*");
    const always = ["localhost", ...(this.#anyAddress ? [] : [isIP(server.host) === 6 ? `[${server.host}]` : server.host])];
    if (server.publicUrl) always.push(new URL(server.publicUrl).host);
    for (const text of [...always, ...server.allowedHosts]) {
      const entry = text === "*" ? undefined : parseHostEntry(text);
      if (!entry) continue;
      if (entry.port === undefined) this.#names.add(entry.name);
      else {
        this.#hostPorts.add(`${entry.name}:${entry.port}`);
        if (entry.port === "80") this.#hostPorts.add(entry.name);
      }
    }
    if (server.trustedProxies.length) {
      this.#proxies = new BlockList();
      for (const r of server.trustedProxies.map(parseAddressRange)) if (r) this.#proxies.addSubnet(r.address, r.prefix, r.family);
    }
  }

  /** Whether a request may name `authority` (`host[:port]`, lower-case) as its host. */
  allows(authority: string): boolean {
    if (this.#names.has(authority) || this.#any) return true;
    const name = nameOf(authority);
    if (this.#names.has(name) || this.#hostPorts.has(authority)) return true;
    return this.#anyAddress && (name.charCodeAt(0) === 91 /* [ */ || isIP(name) === 4);
  }

  /**
   * The request to route, or the 400 that refuses its host. A trusted proxy's X-Forwarded-Host
   * and X-Forwarded-Proto give the request the URL its client called (so a job's file URLs are on
   * it); anyone else's are ignored.
   */
  check(req: Request, peer: unknown): Request | Response {
    const url = req.url;
    const start = url.indexOf("//") + 2;
    const path = url.indexOf("/", start);
    const authority = url.slice(start, path);
    if (this.#proxies && (req.headers.has("x-forwarded-host") || req.headers.has("x-forwarded-proto")) && this.#trusted(req, peer)) {
      return this.#forwarded(req, authority, url.slice(path));
    }
    return this.allows(authority) ? req : refused(authority);
  }

  #trusted(req: Request, peer: unknown): boolean {
    const ip = (peer as PeerSource | undefined)?.requestIP?.(req);
    return !!ip && this.#proxies!.check(ip.address, ip.family === "IPv6" ? "ipv6" : "ipv4");
  }

  /** The request as its client sent it to the proxy in front: on the forwarded scheme and host. */
  #forwarded(req: Request, authority: string, pathAndQuery: string): Request | Response {
    const proto = firstValue(req.headers.get("x-forwarded-proto"))?.toLowerCase();
    const scheme = proto === "https" || proto === "http" ? proto : "http";
    const forwardedHost = firstValue(req.headers.get("x-forwarded-host"))?.toLowerCase();
    let host = authority;
    if (forwardedHost !== undefined) {
      const entry = parseHostEntry(forwardedHost);
      if (!entry) return jsonAnswer({ error: `X-Forwarded-Host "${forwardedHost}" is not a host` }, 400);
      host = entry.port === undefined ? entry.name : `${entry.name}:${entry.port}`;
      if (!this.allows(host)) return refused(host, " (X-Forwarded-Host)");
    } else if (!this.allows(authority)) return refused(authority);
    const target = new URL(`${scheme}://${host}${pathAndQuery}`).href;
    return target === req.url ? req : new Request(target, req);
  }
}

const refused = (host: string, via = "") =>
  jsonAnswer({ error: `Host "${host}"${via} is not one this server answers for: add it to server.allowedHosts` }, 400);

const SLASH = 47;
const noHost = () => jsonAnswer({ error: "the request has no valid Host header" }, 400);

/**
 * The host step: a 400 for a request without a usable Host header (Bun gives it its path alone as
 * URL, from which no route or job origin can be read: HTTP/1.1 answers it 400) or for a host this
 * server does not answer for; otherwise the request as its client called it, behind a trusted proxy.
 */
export function checkHost(hosts: AllowedHosts): Step {
  return (call, next) => {
    if (call.req.url.charCodeAt(0) === SLASH) return Promise.resolve(noHost());
    const checked = hosts.check(call.req, call.peer);
    if (checked instanceof Response) return Promise.resolve(checked);
    call.req = checked;
    return next(call);
  };
}
