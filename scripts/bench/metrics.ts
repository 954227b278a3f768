#!/usr/bin/env bun
/**
 * Cost of a /metrics scrape as the queue grows: a server on the embedded store with 1k, 10k and
 * 100k jobs queued on one endpoint, scraped back to back, beside GET /health of that endpoint
 * (the same store.health read, through the same auth) and GET /scaling (KEDA's metrics-api read)
 * in the same run. A scrape reads store.health and store.scalingStats once per configured
 * endpoint and renders every metric, so neither cost should grow with the backlog.
 *
 *   bun scripts/bench/metrics.ts [--backlog 1000,10000,100000] [--scrapes 200]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { systemClock } from "../../runtime/clock.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { silentLog } from "../../runtime/log.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { startServer } from "../../runtime/server/serve.ts";
import { createStore, storeOptions } from "../../runtime/server/store/create-store.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";

const { values } = parseArgs({
  options: { backlog: { type: "string", default: "1000,10000,100000" }, scrapes: { type: "string", default: "200" } },
});
const backlogs = values.backlog!.split(",").map(Number);
const scrapes = Number(values.scrapes);

async function timed(url: string, key: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return performance.now() - t;
}

const rows: string[][] = [];
for (const backlog of backlogs) {
  const dir = mkdtempSync(join(tmpdir(), "spool-bench-metrics-"));
  const config = parseConfig({ server: { port: 0, host: "127.0.0.1", data: dir }, endpoints: { ep: { workersMax: 1_000 }, other: {} } });
  const store = await createStore(dir, storeOptions(config));
  const now = systemClock.now();
  for (let i = 0; i < backlog; i++) {
    await store.enqueue(
      {
        id: `job-${i}`,
        endpointId: "ep",
        input: {},
        policy: { executionTimeout: 600_000, lowPriority: false, ttl: 86_400_000 },
        sync: false,
      },
      now,
    );
  }
  const { key } = await createKey(store, "bench", now);
  const server = startServer({ config, store, log: silentLog });
  try {
    const metrics = `${server.url}/metrics`;
    const health = `${server.url}/v2/ep/health`;
    const scaling = `${server.url}/v2/ep/scaling`;
    for (let i = 0; i < 20; i++) await timed(metrics, key), await timed(health, key), await timed(scaling, key); // warm up
    const m: number[] = [];
    const h: number[] = [];
    const sc: number[] = [];
    // Interleaved, so a noisy neighbour weighs on both alike.
    for (let i = 0; i < scrapes; i++) {
      m.push(await timed(metrics, key));
      h.push(await timed(health, key));
      sc.push(await timed(scaling, key));
    }
    const ms = summarize(m);
    const hs = summarize(h);
    const ss = summarize(sc);
    rows.push([
      backlog.toLocaleString("en"),
      `${ms.p50.toFixed(2)} ms`,
      `${ms.p95.toFixed(2)} ms`,
      `${hs.p50.toFixed(2)} ms`,
      (ms.p50 / hs.p50).toFixed(1),
      `${ss.p50.toFixed(2)} ms`,
      `${ss.p95.toFixed(2)} ms`,
    ]);
  } finally {
    await server.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(machineLine(machine()));
console.log(`GET /metrics (2 endpoints, ${scrapes} scrapes each) against GET /health and GET /scaling of the queued endpoint, same run:`);
printTable(["jobs queued", "/metrics p50", "/metrics p95", "/health p50", "ratio p50", "/scaling p50", "/scaling p95"], "rrrrrrr", rows);
