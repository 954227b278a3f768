import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startTestServer } from "../helpers/test-server.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";
import { isPrivateAddress, webhookTarget } from "../../runtime/server/jobs/webhook-address.ts";

const HTTPS_FIXTURE = resolve(import.meta.dir, "../fixtures/https-webhook-fixture.ts");

/** A resolver that answers `answers` in turn (the last one repeats), counting lookups. */
function scripted(...answers: string[]) {
  const asked: string[] = [];
  return {
    asked,
    resolve: async (host: string) => {
      asked.push(host);
      return [{ address: answers[Math.min(asked.length - 1, answers.length - 1)]! }];
    },
  };
}

test("a webhook call goes to the address that was checked, with the name's Host, from one lookup at submission and one per call", async () => {
  await using receiver = startReceiver([200]);
  const port = new URL(receiver.url).port;
  // hooks.spool.test resolves nowhere but through this resolver: 127.0.0.1 for the submission's
  // check and for the call, 169.254.169.254 for any lookup after them.
  const dns = scripted("127.0.0.1", "127.0.0.1", "169.254.169.254");
  await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: ["127.0.0.1/32"] }, resolver: dns.resolve });
  const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: `http://hooks.spool.test:${port}/hook` });
  const w = protocolWorker(srv, "echo", "w1");
  await w.take();
  await w.done(id, { output: { ok: 1 } });
  const [call] = await receiver.received(1);
  expect(call!.headers.host).toBe(`hooks.spool.test:${port}`);
  expect(JSON.parse(call!.body)).toMatchObject({ id, status: "COMPLETED" });
  expect(dns.asked).toEqual(["hooks.spool.test", "hooks.spool.test"]);
});

test("a name that answers a public address first and 127.0.0.1 next is called at the public address; a loopback answer is refused unless allowed", async () => {
  const dns = scripted("203.0.113.7", "127.0.0.1");
  expect(await webhookTarget("https://hooks.example.com/x", [], dns.resolve)).toEqual({ address: "203.0.113.7" });
  expect(await webhookTarget("https://hooks.example.com/x", [], dns.resolve)).toEqual({
    refused: "hooks.example.com resolves to 127.0.0.1, a private, loopback or link-local address not in webhookAllow",
  });
  expect(await webhookTarget("https://hooks.example.com/x", ["127.0.0.0/8"], dns.resolve)).toEqual({ address: "127.0.0.1" });
  expect(await webhookTarget("https://hooks.example.com/x", ["hooks.example.com"], dns.resolve)).toEqual({ address: "127.0.0.1" });
  expect(await webhookTarget("http://[fd00::5]/x", ["fd00::/8"])).toEqual({ address: "fd00::5" });
  expect(await webhookTarget("http://10.2.0.1/x", ["10.1.0.0/16"])).toEqual({
    refused: "10.2.0.1 resolves to 10.2.0.1, a private, loopback or link-local address not in webhookAllow",
  });
});

test("a name with several addresses is refused when any of them is private and not allowed, at submission and at the call", async () => {
  const answers: Record<string, string[]> = {
    "mixed.spool.test": ["203.0.113.7", "10.0.0.8"],
    "public.spool.test": ["203.0.113.7", "198.51.100.2"],
    "lan.spool.test": ["10.1.0.9", "203.0.113.7"],
  };
  const dns = async (host: string) => (answers[host] ?? []).map((address) => ({ address }));
  expect(await webhookTarget("http://mixed.spool.test/x", [], dns)).toEqual({
    refused: "mixed.spool.test resolves to 10.0.0.8, a private, loopback or link-local address not in webhookAllow",
  });
  // Every address is public: the call goes to the first one.
  expect(await webhookTarget("http://public.spool.test/x", [], dns)).toEqual({ address: "203.0.113.7" });
  // The private one is allowed by its range: the first address is still the one called.
  expect(await webhookTarget("http://lan.spool.test/x", ["10.1.0.0/16"], dns)).toEqual({ address: "10.1.0.9" });
  expect(await webhookTarget("http://lan.spool.test/x", ["10.2.0.0/16"], dns)).toEqual({
    refused: "lan.spool.test resolves to 10.1.0.9, a private, loopback or link-local address not in webhookAllow",
  });

  await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: [] }, resolver: dns });
  const [status, body] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: "http://mixed.spool.test/x" });
  expect([status, body.error]).toEqual([400, expect.stringContaining("webhook")]);
  expect((await srv.json("POST", "/v2/echo/run", { input: {}, webhook: "http://public.spool.test/x" }))[0]).toBe(200);
});

test("an https webhook is called at the checked address with the name's TLS name: the certificate is verified against the name", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-tls-"));
  try {
    const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
    const made = Bun.spawnSync(
      [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "2",
        "-subj",
        "/CN=hooks.spool.test",
        "-addext",
        "subjectAltName=DNS:hooks.spool.test",
      ],
      { stderr: "pipe" },
    );
    expect(made.exitCode).toBe(0);
    // The certificate is trusted from the process's start, so the sender runs in a child process.
    const child = Bun.spawn([process.execPath, HTTPS_FIXTURE, cert, key], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: cert },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
    const seen = JSON.parse(out.trim().split("\n").at(-1)!);
    // The certificate names no IP address: the call that arrived was verified against the name.
    expect(seen.calls).toEqual([{ host: expect.stringMatching(/^hooks\.spool\.test:\d+$/), id: seen.good }]);
    // The same address under a name the certificate does not carry fails its TLS check.
    expect(seen.problem).toContain("ALTNAME");
    expect(seen.resolved).toEqual(["hooks.spool.test", "other.spool.test"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test("isPrivateAddress: each reserved range at both ends and just outside, IPv4 inside IPv6 judged by the IPv4 list", () => {
  const table: Record<string, boolean> = {
    // 0.0.0.0/8, 100.64.0.0/10, 169.254.0.0/16, 192.0.0.0/24, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4
    "0.0.0.0": true,
    "0.255.255.255": true,
    "1.0.0.0": false,
    "100.63.255.255": false,
    "100.64.0.0": true,
    "100.127.255.255": true,
    "100.128.0.0": false,
    "169.253.255.255": false,
    "169.254.0.0": true,
    "169.254.169.254": true,
    "169.254.255.255": true,
    "169.255.0.0": false,
    "191.255.255.255": false,
    "192.0.0.0": true,
    "192.0.0.255": true,
    "192.0.1.0": false,
    "198.17.255.255": false,
    "198.18.0.0": true,
    "198.19.255.255": true,
    "198.20.0.0": false,
    "223.255.255.255": false,
    "224.0.0.0": true,
    "239.255.255.255": true,
    "240.0.0.0": true,
    "255.255.255.254": true,
    // ::, ::1, fc00::/7, fe80::/10, multicast
    "::": true,
    "::1": true,
    "::2": true,
    "fbff:ffff::1": false,
    "fc00::": true,
    "fdff:ffff::1": true,
    "fe00::": false,
    "fe80::": true,
    "febf:ffff::1": true,
    "fec0::": false,
    "ff00::": true,
    "2001:db8::1": false,
    // ::ffff:0:0/96 (mapped), 64:ff9b::/96 (NAT64), 2002::/16 (6to4): the IPv4 address inside decides
    "::ffff:0.0.0.0": true,
    "::ffff:100.64.0.1": true,
    "::ffff:198.18.0.1": true,
    "::ffff:240.0.0.1": true,
    "::ffff:203.0.113.7": false,
    "64:ff9b::7f00:1": true,
    "64:ff9b::a9fe:a9fe": true,
    "64:ff9b::10.0.0.1": true,
    "64:ff9b::808:808": false,
    "64:ff9b::203.0.113.7": false,
    "2002:7f00:1::": true,
    "2002:a9fe:a9fe::1": true,
    "2002:c0a8:101:1::1": true,
    "2002:808:808::1": false,
    // local-use NAT64 (64:ff9b:1::/48) reaches the network it is on
    "64:ff9b:1::808:808": true,
    "64:ff9b:1:ffff::1": true,
  };
  const got = Object.fromEntries(Object.keys(table).map((ip) => [ip, isPrivateAddress(ip)]));
  expect(got).toEqual(table);
});
