import { describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "../../runtime/clock.ts";
import { startServer } from "../../runtime/server/serve.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { MemoryLog, silentLog } from "../../runtime/log.ts";
import { createStore } from "../../runtime/server/store/create-store.ts";
import { webhookSecret } from "../../runtime/server/webhooks/webhook-signature.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";
import { until } from "../helpers/until.ts";

/** Runs one job to the end with a webhook: COMPLETED, or FAILED when `error` is given. */
async function finishJob(srv: TestServer, webhook: string, result: { output?: unknown; error?: unknown } = { output: { ok: 1 } }) {
  const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { n: 1 }, webhook });
  const w = protocolWorker(srv, "echo", "w1");
  await w.take();
  await w.done(id, result);
  return id as string;
}

describe("webhooks", () => {
  test("a finished job POSTs its /status payload, signed so that the Standard Webhooks library verifies it", async () => {
    await using receiver = startReceiver([200]);
    await using srv = await startTestServer();
    const id = await finishJob(srv, receiver.url);
    const [call] = await receiver.received(1);
    const [, status] = await srv.json("GET", `/v2/echo/status/${id}`);
    expect(JSON.parse(call!.body)).toEqual(status);
    expect(call!.headers["content-type"]).toBe("application/json");

    const secret = webhookSecret(srv.server.config);
    expect(secret).toStartWith("whsec_");
    const verified = new Webhook(secret).verify(call!.body, call!.headers);
    expect(verified).toEqual(status);
    // A tampered body or another secret fails verification.
    expect(() => new Webhook(secret).verify(call!.body.replace("COMPLETED", "FAILED"), call!.headers)).toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.from("another secret, 24 bytes!").toString("base64")}`).verify(call!.body, call!.headers),
    ).toThrow();
  });

  /** Waits until the sender has recorded `n` failed attempts (so the retry is scheduled). */
  const failedAttempts = (log: MemoryLog, n: number) =>
    until(
      () => log.lines.filter((l) => l.includes("webhook attempt failed") || l.includes("webhook given up")).length >= n,
      `${n} failed attempts`,
    );

  test("a failed call is retried exactly 2 more times, 10 s apart, with the same webhook-id", async () => {
    const clock = new ManualClock(Date.now());
    const log = new MemoryLog();
    await using receiver = startReceiver([500, 503, 200]);
    await using srv = await startTestServer({ clock, log });
    await finishJob(srv, receiver.url);
    await failedAttempts(log, 1);
    const firstAt = clock.now();

    clock.advance(9_999);
    // The sender looked again at 9.999 s and went back to sleep until the retry, due at 10 s.
    await until(() => clock.dueTimes.includes(firstAt + 10_000), "the sender to sleep until the retry");
    expect(receiver.calls.length).toBe(1);
    clock.advance(1);
    await failedAttempts(log, 2);
    clock.advance(10_000);
    const calls = await receiver.received(3);
    await until(() => log.lines.some((l) => l.includes("webhook delivered")), "the delivery to be recorded");
    // Nothing is owed any more, however long the sender goes on.
    expect(await srv.store.takeDueDeliveries(clock.now() + 86_400_000, 60_000, 10)).toEqual([]);
    expect(calls.length).toBe(3);
    expect(new Set(calls.map((c) => c.headers["webhook-id"])).size).toBe(1);
    expect(calls.map((c) => Number(c.headers["webhook-timestamp"]) - Number(calls[0]!.headers["webhook-timestamp"]))).toEqual([0, 10, 20]);
  });

  test("after 3 failed attempts the call is given up", async () => {
    const clock = new ManualClock(Date.now());
    const log = new MemoryLog();
    await using receiver = startReceiver([500]);
    await using srv = await startTestServer({ clock, log });
    await finishJob(srv, receiver.url);
    await failedAttempts(log, 1);
    clock.advance(10_000);
    await failedAttempts(log, 2);
    clock.advance(10_000);
    await failedAttempts(log, 3);
    // Nothing is owed any more: no later attempt can go out.
    expect(await srv.store.takeDueDeliveries(clock.now() + 86_400_000, 60_000, 10)).toEqual([]);
    expect(receiver.calls.length).toBe(3);
    expect(log.lines.some((l) => l.includes("webhook given up"))).toBe(true);
  });

  test("a network error counts as a failed attempt: 3 in all, then given up", async () => {
    const clock = new ManualClock(Date.now());
    const log = new MemoryLog();
    await using srv = await startTestServer({ clock, log });
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const url = `http://127.0.0.1:${closed.port}/gone`;
    await closed.stop(true); // nothing listens there now
    await finishJob(srv, url);
    const failures = () => log.lines.filter((l) => l.includes("webhook attempt failed")).length;
    await until(() => failures() === 1, "the first attempt");
    clock.advance(10_000);
    await until(() => failures() === 2, "the second attempt");
    clock.advance(10_000);
    const gaveUp = await until(() => log.lines.find((l) => l.includes("webhook given up")), "the call to be given up");
    expect(JSON.parse(gaveUp)).toMatchObject({ attempts: 3 });
  });

  test("every final state calls the webhook: FAILED, CANCELLED and TIMED_OUT too", async () => {
    const clock = new ManualClock(Date.now());
    await using receiver = startReceiver([200]);
    await using srv = await startTestServer({ clock });
    await finishJob(srv, receiver.url, { error: "boom" });
    const [, { id: cancelled }] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: receiver.url });
    await srv.json("POST", `/v2/echo/cancel/${cancelled}`);
    const [, { id: late }] = await srv.json("POST", "/v2/echo/run", {
      input: {},
      webhook: receiver.url,
      policy: { executionTimeout: 6_000 },
    });
    await protocolWorker(srv, "echo", "w2").take();
    clock.advance(6_000);
    await srv.server.sweep();
    const calls = await receiver.received(3);
    expect(calls.map((c) => JSON.parse(c.body).status).sort()).toEqual(["CANCELLED", "FAILED", "TIMED_OUT"]);
    expect(calls.map((c) => JSON.parse(c.body).id)).toContain(late);
  });

  test("a receiver that never answers does not delay the job path or other calls", async () => {
    const hung = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    await using receiver = startReceiver([200]);
    await using srv = await startTestServer({ server: { webhookTimeoutMs: 60_000 } });
    await finishJob(srv, `http://127.0.0.1:${hung.port}/slow`);
    const id = await finishJob(srv, receiver.url);
    const [call] = await receiver.received(1);
    expect(JSON.parse(call!.body).id).toBe(id);
    const [code] = await srv.json("GET", "/v2/echo/health");
    expect(code).toBe(200);
    hung.stop(true);
  });

  test("a call owed when the server stopped is delivered by the next server on the same data", async () => {
    await using receiver = startReceiver([200]);
    const dataDir = mkdtempSync(join(tmpdir(), "spool-webhook-"));
    try {
      const retention = { syncMs: 60_000, asyncMs: 1_800_000 };
      // The job ends while no server runs: its call is recorded with its final state.
      const store = await createStore(dataDir, { retention });
      const now = Date.now();
      const policy = { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 };
      await store.enqueue({ id: "job-1", endpointId: "echo", input: {}, policy, sync: false, webhook: receiver.url }, now);
      await store.claim("echo", "w1", 1, now);
      await store.finish("w1", "job-1", { output: { done: true } }, false, now);
      await store.close();

      const server = startServer({
        config: parseConfig({
          server: { port: 0, host: "127.0.0.1", data: dataDir, webhookAllow: ["127.0.0.1"] },
          endpoints: { echo: {} },
        }),
        log: silentLog,
      });
      try {
        const [call] = await receiver.received(1);
        expect(JSON.parse(call!.body)).toMatchObject({ id: "job-1", status: "COMPLETED", output: { done: true } });
      } finally {
        await server.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
