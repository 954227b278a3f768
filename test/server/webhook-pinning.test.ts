import { expect, test } from "bun:test";
import { startTestServer } from "../helpers/test-server.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";
import { webhookTarget } from "../../runtime/server/webhooks/webhook-address.ts";

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

test("a webhook call goes to the address that was checked, with the name's Host, from one lookup per call", async () => {
  await using receiver = startReceiver([200]);
  const port = new URL(receiver.url).port;
  // hooks.spool.test resolves nowhere but through this resolver: 127.0.0.1 first, 169.254.169.254 next.
  const dns = scripted("127.0.0.1", "169.254.169.254");
  await using srv = await startTestServer({ server: { webhookBlockPrivate: true, webhookAllow: ["127.0.0.1/32"] }, resolver: dns.resolve });
  const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: `http://hooks.spool.test:${port}/hook` });
  const w = protocolWorker(srv, "echo", "w1");
  await w.take();
  await w.done(id, { output: { ok: 1 } });
  const [call] = await receiver.received(1);
  expect(call!.headers.host).toBe(`hooks.spool.test:${port}`);
  expect(JSON.parse(call!.body)).toMatchObject({ id, status: "COMPLETED" });
  expect(dns.asked).toEqual(["hooks.spool.test"]);
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
