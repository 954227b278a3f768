import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ensureBubblewrap, SANDBOXES } from "../../helpers/sandbox.ts";
import { stuckPids } from "../../helpers/stuck-pids.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";

const HELPER = resolve(import.meta.dir, "../../fixtures/helper-fixture.ts");
const pids = stuckPids();
afterAll(() => pids[Symbol.dispose]());
beforeAll(ensureBubblewrap);

/** The processes of this file's workers and of every helper they started (found by their environment). */
const treeOf = (): number[] => pids.live([process.pid]);
const helpers = (): number[] => treeOf().filter((pid) => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep");

function helperServer(sandbox: (typeof SANDBOXES)[number]): Promise<TestServer> {
  return startTestServer({
    server: { sandbox, takeWaitMs: 30_000, stopWaitMs: 30_000, sweepIntervalMs: 100, scaleIntervalMs: 100, killGraceMs: 500 },
    endpoints: {
      ep: {
        handler: HELPER,
        // Short graces: the worker's after a deadline, and its drain when the server stops.
        env: { ...pids.env, SPOOL_TIMEOUT_GRACE_MS: "500", SPOOL_DRAIN_TIMEOUT_MS: "500" },
        workersMax: 1,
        idleTimeout: 300,
        rateLimits: { status: { requests: 1_000_000 }, runsync: { requests: 1_000_000 } },
      },
    },
  });
}

const status = async (srv: TestServer, id: string): Promise<string> => (await srv.json("GET", `/v2/ep/status/${id}`))[1].status;

for (const sandbox of SANDBOXES) {
  describe(`a handler that starts a helper process sharing its output, then blocks (sandbox: ${sandbox})`, () => {
    test("past its deadline the job is TIMED_OUT, the worker and its helper are ended as one, /health stops showing it stopping, and the next job runs", async () => {
      await using srv = await helperServer(sandbox);
      expect(srv.server.sandbox).toBe(sandbox);
      // /health says how the endpoint's handlers are confined ("none": with the server's rights).
      expect((await srv.json("GET", "/v2/ep/health"))[1].sandbox).toBe(sandbox);
      const [, sub] = await srv.json("POST", "/v2/ep/run", { input: { mode: "block" }, policy: { executionTimeout: 6_000 } });
      await until(() => helpers().length === 1, "the helper process to start", 30_000);
      await until(async () => (await status(srv, sub.id)) === "TIMED_OUT", "the job to time out", 30_000);
      // The helper held the worker's stderr: the worker is gone only once it is.
      await until(() => treeOf().length === 0, "the worker and its helper to be gone", 30_000);
      await until(
        async () => (await srv.json("GET", "/v2/ep/health"))[1].workers.stopping === undefined,
        "/health to stop counting it stopping",
      );
      const [, next] = await srv.json("POST", "/v2/ep/runsync", { input: { mode: "return" } });
      expect(next).toMatchObject({ status: "COMPLETED", output: { ok: true } });
    }, 60_000);

    test("a server that stops while the handler blocks ends the worker and its helper, and its stop returns", async () => {
      const srv = await helperServer(sandbox);
      try {
        await srv.json("POST", "/v2/ep/run", { input: { mode: "block" }, policy: { executionTimeout: 600_000 } });
        await until(() => helpers().length === 1, "the helper process to start", 30_000);
      } finally {
        await srv[Symbol.asyncDispose]();
      }
      // The server's stop waited for the whole tree: nothing of it is left.
      expect(treeOf()).toEqual([]);
    }, 60_000);
  });
}
