import { describe, expect, test } from "bun:test";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { until } from "../helpers/until.ts";

const idem = (key: string) => ({ headers: { "idempotency-key": key } });

describe("Idempotency-Key on /run and /runsync", () => {
  test("the same key twice gives one job, answered as it is now; no key makes a job each time", async () => {
    await using srv = await startTestServer();
    const first = await srv.call("POST", "/v2/echo/run", { input: { n: 1 } }, idem("order-1"));
    const again = await srv.call("POST", "/v2/echo/run", { input: { n: 1 } }, idem("order-1"));
    const [a, b] = [await first.json(), await again.json()] as { id: string; status: string }[];
    expect([first.status, again.status]).toEqual([200, 200]);
    expect(b).toEqual({ id: a!.id, status: "IN_QUEUE" });
    // Sent as a quoted string, it is the same key.
    expect(await (await srv.call("POST", "/v2/echo/run", { input: { n: 1 } }, idem('"order-1"'))).json()).toEqual({
      id: a!.id,
      status: "IN_QUEUE",
    });
    await srv.call("POST", "/v2/echo/run", { input: { n: 1 } });
    await srv.call("POST", "/v2/echo/run", { input: { n: 1 } });
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(3);
    // Once it has ended, the retry answers its final state.
    await srv.call("POST", `/v2/echo/cancel/${a!.id}`);
    expect(await (await srv.call("POST", "/v2/echo/run", { input: { n: 1 } }, idem("order-1"))).json()).toEqual({
      id: a!.id,
      status: "CANCELLED",
    });
  });

  test("a retry of a job accepted before the endpoint's workers began failing to start gets its job, not the 503", async () => {
    await using srv = await startTestServer({ endpoints: { ext: { startFailureLimit: 1, startFailureWindowMs: 0 } } });
    const first = await srv.call("POST", "/v2/ext/run", { input: { n: 1 } }, idem("order-7"));
    const { id } = (await first.json()) as { id: string };
    // A worker of the endpoint reports that it cannot start: the endpoint refuses new work.
    const reported = await srv.call("GET", "/v2/ext/ping/outside-1?status=start_failed&reason=no%20model");
    expect(reported.status).toBe(200);
    expect((await srv.call("POST", "/v2/ext/run", { input: { n: 2 } })).status).toBe(503);
    expect((await srv.call("POST", "/v2/ext/run", { input: { n: 3 } }, idem("order-8"))).status).toBe(503);
    const retried = await srv.call("POST", "/v2/ext/run", { input: { n: 1 } }, idem("order-7"));
    expect([retried.status, await retried.json()]).toEqual([200, { id, status: "FAILED" }]);
    expect((await srv.call("POST", "/v2/ext/run", { input: { n: 9 } }, idem("order-7"))).status).toBe(422);
    expect((await srv.json("GET", "/v2/ext/health"))[1].jobs).toMatchObject({ inQueue: 0, failed: 1 });
  });

  test("the same key with another body is a 422 that changes nothing; a bad key is a 400", async () => {
    await using srv = await startTestServer();
    await srv.call("POST", "/v2/echo/run", { input: { n: 1 } }, idem("k"));
    const other = await srv.call("POST", "/v2/echo/run", { input: { n: 2 } }, idem("k"));
    expect(other.status).toBe(422);
    expect((await other.json()) as unknown).toEqual({
      error: expect.stringMatching(/Idempotency-Key already used for job \S+ with another request body/),
    });
    const long = await srv.call("POST", "/v2/echo/run", { input: {} }, idem("x".repeat(256)));
    expect([long.status, ((await long.json()) as { error: string }).error]).toEqual([
      400,
      "header Idempotency-Key must be 1 to 255 printable ASCII characters",
    ]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(1);
  });

  test("keys belong to their API key: another API key's same key makes its own job", async () => {
    await using srv = await startTestServer();
    const { key: other } = await createKey(srv.store, "other", srv.clock.now());
    const [, a] = await srv.json("POST", "/v2/echo/run", { input: {} });
    const mine = await (await srv.call("POST", "/v2/echo/run", { input: {} }, idem("shared"))).json();
    const theirs = await (await srv.call("POST", "/v2/echo/run", { input: {} }, { auth: other, ...idem("shared") })).json();
    expect(new Set([a.id, (mine as { id: string }).id, (theirs as { id: string }).id]).size).toBe(3);
  });

  test("/runsync with a key: a retry waits on the same job and answers its result", async () => {
    await using srv = await startTestServer();
    const worker = protocolWorker(srv, "echo", "w1");
    const pending = srv.call("POST", "/v2/echo/runsync", { input: { v: 7 } }, idem("sync-1"));
    const job = await until(() => worker.take(), "the runsync job to be queued");
    // The answer was lost: the client sends it again, and waits on the same job.
    const retry = srv.call("POST", "/v2/echo/runsync", { input: { v: 7 } }, idem("sync-1"));
    await until(async () => (await srv.json("GET", "/v2/echo/health"))[1].jobs.inProgress === 1, "the job to run");
    await worker.done(job.id, { output: { v: 7 } });
    const done = (await (await pending).json()) as { id: string; status: string };
    const retried = (await (await retry).json()) as { id: string; output: unknown };
    expect([retried.id, retried.output, done.status]).toEqual([done.id, { v: 7 }, "COMPLETED"]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.completed).toBe(1);
  });
});
