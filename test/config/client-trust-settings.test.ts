import { describe, expect, test } from "bun:test";
import { ConfigError, parseConfig } from "../../runtime/config/config.ts";

/** The ConfigError message parseConfig throws for `server`, or "parsed". */
function refusal(server: Record<string, unknown>): string {
  try {
    parseConfig({ server }, "spool.toml");
    return "parsed";
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
}

describe("server.allowedHosts, trustedProxies and idempotencyTtlMs", () => {
  test("defaults: no extra host, no trusted proxy, keys kept 24 h", () => {
    const { server } = parseConfig({});
    expect([server.allowedHosts, server.trustedProxies, server.idempotencyTtlMs]).toEqual([[], [], 86_400_000]);
  });

  test("names, host:port, IPv6 in brackets and * are hosts; addresses and CIDRs are proxies", () => {
    const { server } = parseConfig({
      server: {
        allowedHosts: ["spool.example.com", "Spool.LAN:8443", "[fd00::1]:8080", "10.0.0.5", "*"],
        trustedProxies: ["10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"],
        idempotencyTtlMs: 3_600_000,
      },
    });
    expect(server.allowedHosts).toEqual(["spool.example.com", "Spool.LAN:8443", "[fd00::1]:8080", "10.0.0.5", "*"]);
    expect(server.trustedProxies).toEqual(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"]);
    expect(server.idempotencyTtlMs).toBe(3_600_000);
  });

  test("a bad CIDR, a URL for a host or a TTL of 0 is a config error naming the setting and the value", () => {
    expect(refusal({ trustedProxies: ["10.0.0.0/33"] })).toBe(
      'spool.toml: server.trustedProxies.0: "10.0.0.0/33" is not an IP address or CIDR range (10.0.0.0/8, fd00::/8)',
    );
    expect(refusal({ trustedProxies: ["10.0.0.1", "proxy.internal"] })).toBe(
      'spool.toml: server.trustedProxies.1: "proxy.internal" is not an IP address or CIDR range (10.0.0.0/8, fd00::/8)',
    );
    expect(refusal({ trustedProxies: ["fd00::/129"] })).toContain('"fd00::/129" is not an IP address or CIDR range');
    expect(refusal({ allowedHosts: ["https://spool.example.com"] })).toBe(
      'spool.toml: server.allowedHosts.0: "https://spool.example.com" is not a host name, an address or host:port (an IPv6 address in brackets)',
    );
    expect(refusal({ allowedHosts: ["spool.lan:99999"] })).toContain('"spool.lan:99999" is not a host name');
    expect(refusal({ allowedHosts: ["fd00::1"] })).toContain('"fd00::1" is not a host name'); // IPv6 needs brackets
    expect(refusal({ idempotencyTtlMs: 0 })).toStartWith("spool.toml: server.idempotencyTtlMs:");
  });
});
