import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { costOf } from "../../runtime/server/jobs/job-cost.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

const STREAM_HANDLER = resolve(import.meta.dir, "../../handlers/examples/stream.ts");

describe("usage per key", () => {
  test("a completed job's output.cost is charged to the key that submitted it; failed jobs are not", async () => {
    await using srv = await startTestServer();
    const other = await createKey(srv.store, "other", Date.now());
    const w = protocolWorker(srv, "echo", "w1");
    const run = async (auth: string, result: unknown) => {
      const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} }, { auth });
      await w.take();
      await w.done(id, result);
    };
    await run(`Bearer ${srv.key}`, { output: { image_url: "x", cost: 0.0000000001 } });
    await run(`Bearer ${srv.key}`, { output: { image_url: "y", cost: 0.02 } });
    await run(`Bearer ${srv.key}`, { error: "boom" });
    await run(`Bearer ${other.key}`, { output: [{ cost: 0.25 }, { cost: 0.5 }] });
    await run(`Bearer ${other.key}`, { output: { no: "cost" } });
    const ids = new Map((await srv.store.listKeys()).map((k) => [k.name, k.id]));
    expect(await srv.store.usage()).toEqual(
      [
        { keyId: ids.get("test")!, endpointId: "echo", jobs: 2, cost: 0.0200000001 },
        { keyId: ids.get("other")!, endpointId: "echo", jobs: 1, cost: 0.75 },
      ].sort((a, b) => a.keyId.localeCompare(b.keyId)),
    );
  });

  test("`spool usage` prints the totals", async () => {
    await using srv = await startTestServer();
    const w = protocolWorker(srv, "echo", "w1");
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await w.take();
    await w.done(id, { output: { cost: 0.0123 } });
    await srv.server.stop();
    const out = Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../../runtime/cli.ts"), "usage", "--data", srv.dataDir]);
    expect(out.exitCode).toBe(0);
    const lines = out.stdout.toString().trim().split("\n");
    expect(lines[1]).toMatch(/^key_\w+\ttest\techo\t1\t0\.0123000000$/);
    expect(lines.at(-1)).toBe("total\t\t\t1\t0.0123000000");
  });

  test("costOf reads output.cost or sums a list's costs, and ignores anything else", () => {
    expect(costOf({ cost: 0.5 })).toBe(0.5);
    expect(costOf([{ cost: 1 }, { cost: 2 }, {}])).toBe(3);
    expect(costOf({ cost: "1" })).toBeUndefined();
    expect(costOf({ cost: -1 })).toBeUndefined();
    expect(costOf(null)).toBeUndefined();
    expect(costOf([])).toBeUndefined();
    // An impossible cost is not charged (and cannot overflow the usage sums).
    expect(costOf({ cost: 1e9 })).toBeUndefined();
    expect(costOf([{ cost: 6e5 }, { cost: 6e5 }])).toBeUndefined();
  });
});

describe("input validated at submission", () => {
  test("an endpoint whose handler the server can import refuses invalid input with 400 naming the field", async () => {
    await using srv = await startTestServer({
      server: { scaleIntervalMs: 3_600_000 },
      endpoints: { words: { handler: STREAM_HANDLER, workersMax: 0 } },
    });
    const [code, body] = await srv.json("POST", "/v2/words/run", { input: { text: 5 } });
    expect(code).toBe(400);
    expect(body.error).toStartWith("Invalid parameter: text:");
    expect((await srv.json("GET", "/v2/words/health"))[1].jobs.inQueue).toBe(0);
    expect((await srv.json("POST", "/v2/words/run", { input: { text: "fine" } }))[0]).toBe(200);
  });
});
