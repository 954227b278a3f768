import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { SqliteStore } from "../../runtime/server/store/sqlite/sqlite-store.ts";
import type { NewJob } from "../../runtime/server/store/store.ts";
import { RETENTION } from "./store-suite.ts";

const T0 = 1_790_000_000_000;
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const newJob = (id: string, over: Partial<NewJob> = {}): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false, ...over });

/**
 * Every statement the store runs on the request path and in its sweep, recorded as it runs, must
 * find its rows through an index: a plan that scans a table (cost growing with the backlog) fails.
 */
test("no statement of submit, take, done, status, cancel, retry, purge, health, the job list or the sweep scans a table", async () => {
  const store = SqliteStore.open(":memory:", { retention: RETENTION });
  const seen = new Set<string>();
  const query = Database.prototype.query;
  const prepare = Database.prototype.prepare;
  Database.prototype.query = function (this: Database, sql: string) {
    db = this;
    seen.add(sql);
    return query.call(this, sql);
  } as typeof query;
  Database.prototype.prepare = function (this: Database, sql: string, ...rest: unknown[]) {
    db = this;
    seen.add(sql);
    return (prepare as (...a: unknown[]) => unknown).call(this, sql, ...rest);
  } as typeof prepare;
  let db: Database | undefined;
  try {
    for (let i = 0; i < 6; i++) await store.enqueue(newJob(`j${i}`, { webhook: "http://x/h", keyId: "k" }), T0);
    await store.enqueue(newJob("long", { input: { text: "x".repeat(10_000) } }), T0); // kept beside its row
    // An Idempotency-Key: written, replayed, looked up, and pruned by the sweep below.
    const tag = { key: "order-1", bodyHash: "h", ttlMs: 86_400_000 };
    await store.enqueue(newJob("keyed", { keyId: "k", idempotency: tag }), T0);
    expect((await store.enqueue(newJob("again", { keyId: "k", idempotency: tag }), T0)).id).toBe("keyed");
    await store.findByIdempotencyKey("k", "ep", "order-1", T0);
    expect(JSON.stringify((await store.get("ep", "long", T0))?.input).length).toBeGreaterThan(10_000);
    await store.touchWorker("w", "ep", "k", T0, { runningIds: [], missingAfterMs: 1_000 });
    await store.claim("ep", "w", 3, T0);
    await store.returnJobs("w", ["j2"], T0);
    await store.claim("ep", "w", 1, T0);
    await store.progress("w", "j0", { pct: 1 }, T0);
    await store.appendChunks("w", "j0", ["a"], T0);
    await store.readStream("ep", "j0", T0);
    await store.readChunks("ep", "j0", 0, T0);
    await store.finish("w", "j0", { output: { ok: 1 } }, false, T0, 0.001);
    await store.finish("w", "j1", { error: "boom" }, false, T0);
    await store.get("ep", "j3", T0);
    await store.queuePosition("ep", "j4", T0);
    await store.setExpiry("ep", "j4", T0 + 100_000, T0);
    await store.queueDepth("ep", T0);
    await store.health("ep", T0, 60_000);
    await store.scalingStats("ep", T0, 60_000);
    await store.cancel("ep", "j2", T0);
    await store.cancel("ep", "j3", T0);
    await store.retry("ep", "j1", T0);
    await store.takeStops("w");
    // /requests: a page, with and without a status (the queued ones come from memory).
    for (const status of [undefined, "IN_QUEUE", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"] as const) {
      const page = await store.recent("ep", T0, 1, undefined, status);
      await store.recent("ep", T0, 1, page.next, status);
    }
    await store.sweep(T0 + 90_000_000, 60_000);
    await store.enqueue(newJob("late"), T0);
    await store.purgeQueue("ep", T0);
    await store.takeDueDeliveries(T0, 1_000, 10);
    await store.findKey("nope");
  } finally {
    Database.prototype.query = query;
    Database.prototype.prepare = prepare;
  }
  const plans: Record<string, string[]> = {};
  for (const sql of seen) {
    if (/^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)/i.test(sql)) continue;
    const steps = db!
      .query<{ detail: string }, []>(`EXPLAIN QUERY PLAN ${sql}`)
      .all()
      .map((r) => r.detail);
    plans[sql.replace(/\s+/g, " ").trim()] = steps;
  }
  const bad = Object.entries(plans).filter(([sql, steps]) => grows(sql, steps));
  expect(Object.keys(plans).length).toBeGreaterThan(20);
  expect(bad).toEqual([]);

  // The rule catches what the backlog used to cost: the old backpressure count and health.
  const explain = (sql: string) =>
    db!
      .query<{ detail: string }, []>(`EXPLAIN QUERY PLAN ${sql}`)
      .all()
      .map((r) => r.detail);
  const oldDepth = "SELECT COUNT(*) AS n FROM jobs WHERE endpoint = ? AND status = 'IN_QUEUE' AND expires_at > ?";
  const oldHealth = "SELECT status, COUNT(*) AS n FROM jobs WHERE endpoint = ? AND expires_at > ? GROUP BY status";
  const unindexedMin = "SELECT MIN(queued_at) AS m FROM jobs";
  // The old /requests?status= walked an endpoint's history for the page's rows of one status.
  const oldList =
    "SELECT rowid AS rid, * FROM jobs WHERE endpoint = ? AND status = ? AND expires_at > ? AND rowid < ? ORDER BY rowid DESC LIMIT ?";
  expect([oldDepth, oldHealth, unindexedMin, oldList].map((sql) => grows(sql, explain(sql)))).toEqual([true, true, true, true]);
  await store.close();
});

/**
 * Whether a statement's cost grows with the number of jobs: it scans a table (`workers` aside:
 * one row per live worker, the fleet's size; and jobs_in_progress, a partial index of running jobs
 * only), or it aggregates over jobs other than those that expired since the last sweep (the
 * expiry index) or those one worker runs.
 */
function grows(sql: string, steps: string[]): boolean {
  // The running jobs' index may be walked only by a statement over running jobs that looks up no one job.
  const overRunning = /status = 'IN_PROGRESS'/.test(sql) && !/\bid = \?/.test(sql);
  const bounded = (d: string) => /^SCAN (w|workers)$/.test(d) || (overRunning && /^SCAN \w+ USING INDEX jobs_in_progress$/.test(d));
  if (steps.some((d) => /^SCAN /.test(d) && !bounded(d))) return true;
  // Rows wanted by a status given as a parameter are found by it, not filtered from others.
  if (/\bWHERE\b.*\bstatus = \?(?!\d)/s.test(sql) && /\bFROM jobs\b/.test(sql) && !steps.some((d) => /\bstatus=\?/.test(d))) return true;
  // A bare MIN or MAX of one indexed column is SQLite's min/max optimisation: one index entry read.
  if (
    /^SELECT (MIN|MAX)\(\w+\)( AS \w+)? FROM jobs$/i.test(sql) &&
    steps.length === 1 &&
    /^SEARCH jobs USING COVERING INDEX \w+$/.test(steps[0]!)
  )
    return false;
  const aggregates = /\b(COUNT|SUM|MIN|MAX)\s*\(|GROUP BY/i.test(sql) && /\bFROM jobs\b/i.test(sql);
  return aggregates && !steps.some((d) => /USING INDEX (jobs_expiry \(expires_at<\?\)|jobs_in_progress \(worker_id=\?\))/.test(d));
}
