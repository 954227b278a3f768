import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SCHEMA_VERSION } from "../../runtime/server/store/sqlite/sqlite-schema.ts";
import { SqliteStore } from "../../runtime/server/store/sqlite/sqlite-store.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";
import { runStoreLogsSuite } from "./store-logs-suite.ts";
import { until } from "../helpers/until.ts";

runStoreSuite("sqlite", async () => SqliteStore.open(":memory:", { retention: RETENTION }));
runStoreLogsSuite("sqlite", async () => SqliteStore.open(":memory:", { retention: RETENTION }));

const T0 = 1_790_000_000_000;
/** Takes a file back to before schema 10 (no Idempotency-Key columns), for the tests that fake an older file. */
const BEFORE_IDEMPOTENCY = "DROP TABLE idempotency_keys;";
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };

test("sqlite: counts and queue order kept in memory are rebuilt from the file when it is opened again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c", "d"])
      await s.enqueue({ id, endpointId: "ep", input: {}, policy: { ...policy, lowPriority: id === "d" }, sync: false }, T0);
    await s.claim("ep", "w", 1, T0);
    await s.cancel("ep", "b", T0);
    await s.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect((await s.health("ep", T0, 60_000)).jobs).toEqual({ completed: 0, failed: 0, inProgress: 1, inQueue: 2, retried: 0 });
    expect(await Promise.all(["a", "b", "c", "d"].map((id) => s.queuePosition("ep", id, T0)))).toEqual([null, null, 0, 1]);
    expect(await s.scalingStats("ep", T0, 60_000)).toMatchObject({ queued: 1, queuedLowPriority: 1, inProgress: 1, oldestQueuedAt: T0 });
    await s.enqueue({ id: "e", endpointId: "ep", input: {}, policy, sync: false }, T0 + 1);
    expect((await s.claim("ep", "w", 5, T0 + 1)).map((j) => j.id)).toEqual(["c", "d", "e"]);
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: every job's page, a retried one among them, is the same after the file is opened again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  const pages = async (s: SqliteStore) => {
    const out: string[] = [];
    let next: string | undefined;
    do {
      const page = await s.recent("ep", T0, 2, next);
      out.push(...page.jobs.map((j) => j.id));
      next = page.next;
    } while (next);
    return out;
  };
  try {
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c", "d", "e", "f"]) await s.enqueue({ id, endpointId: "ep", input: {}, policy, sync: false }, T0);
    await s.claim("ep", "w", 2, T0);
    await s.finish("w", "a", { error: "boom" }, false, T0);
    await s.retry("ep", "a", T0); // queued last, listed by its submission
    await s.returnJobs("w", ["b"], T0);
    const before = await pages(s);
    expect(before).toEqual(["f", "e", "d", "c", "b", "a"]);
    await s.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect(await pages(s)).toEqual(before);
    expect((await s.claim("ep", "w", 6, T0)).map((j) => j.id)).toEqual(["b", "c", "d", "e", "f", "a"]);
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a file of schema 6 opens, keeps its jobs and chunks, and gets the partial indexes", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c"]) await s.enqueue({ id, endpointId: "ep", input: { id }, policy, sync: false }, T0);
    await s.claim("ep", "w", 1, T0);
    await s.close();
    // Turn the file back into what schema 6 wrote: its indexes, no output_chunk, a result's chunk as a row.
    const db = new Database(join(dir, "spool.db"));
    db.run(`DROP INDEX jobs_in_progress; ALTER TABLE jobs DROP COLUMN output_chunk;
      CREATE INDEX jobs_deadline ON jobs(deadline) WHERE status = 'IN_PROGRESS';
      CREATE INDEX jobs_queue ON jobs(endpoint, status, seq);
      CREATE INDEX jobs_worker_status ON jobs(worker_id, status) WHERE worker_id IS NOT NULL;
      UPDATE jobs SET status = 'COMPLETED', output = '{"v":1}', chunk_count = 1, completed_at = ${T0}, worker_id = 'w' WHERE id = 'a';
      INSERT INTO stream_chunks (job_id, seq, data) VALUES ('a', 0, '{"v":1}');
      ${BEFORE_IDEMPOTENCY}
      ALTER TABLE workers DROP COLUMN key_id; ALTER TABLE jobs DROP COLUMN origin; ALTER TABLE jobs DROP COLUMN traceparent;
      PRAGMA user_version = 6;`);
    db.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect((await s.readChunks("ep", "a", 0, T0))?.chunks).toEqual([{ v: 1 }]);
    expect((await s.claim("ep", "w", 5, T0)).map((j) => j.id)).toEqual(["b", "c"]);
    await s.finish("w", "b", { output: { v: 2 } }, true, T0);
    expect((await s.readStream("ep", "b", T0))?.chunks).toEqual([{ v: 2 }]);
    expect((await s.readStream("ep", "b", T0))?.chunks).toEqual([]);
    await s.close();
    const after = new Database(join(dir, "spool.db"));
    const indexes = after
      .query<{ name: string }, []>(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL ORDER BY name",
      )
      .all()
      .map((r) => r.name);
    after.close();
    expect(indexes).toEqual(["jobs_ended", "jobs_expiry", "jobs_in_progress"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a file of schema 8 opens without the on-disk queue index, and its queue still claims and purges in order", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c", "d"]) await s.enqueue({ id, endpointId: "ep", input: { id }, policy, sync: false }, T0);
    await s.close();
    const db = new Database(join(dir, "spool.db"));
    db.run(
      `CREATE INDEX jobs_queued ON jobs(endpoint, seq) WHERE status = 'IN_QUEUE'; ${BEFORE_IDEMPOTENCY} ALTER TABLE workers DROP COLUMN key_id; ALTER TABLE jobs DROP COLUMN origin; ALTER TABLE jobs DROP COLUMN traceparent; PRAGMA user_version = 8;`,
    );
    db.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect((await s.claim("ep", "w", 1, T0)).map((j) => j.id)).toEqual(["a"]);
    expect(await s.purgeQueue("ep", T0)).toBe(3);
    expect((await s.health("ep", T0, 60_000)).jobs).toMatchObject({ inQueue: 0, inProgress: 1 });
    expect(await s.get("ep", "b", T0)).toBeNull();
    await s.close();
    const after = new Database(join(dir, "spool.db"));
    const version = after.query<{ user_version: number }, []>("PRAGMA user_version").get()!.user_version;
    const queuedIndex = after.query("SELECT name FROM sqlite_master WHERE name = 'jobs_queued'").get();
    after.close();
    expect([version, queuedIndex]).toEqual([SCHEMA_VERSION, null]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: writes committed together stand or fall alone: a failing one rejects, the others land", async () => {
  const s = SqliteStore.open(":memory:", { retention: RETENTION });
  const job = (id: string) => ({ id, endpointId: "ep", input: { id }, policy, sync: false });
  await s.enqueue(job("a"), T0);
  // Same turn of the event loop: one transaction, in which the duplicate id fails.
  const results = await Promise.allSettled([
    s.enqueue(job("b"), T0),
    s.enqueue(job("a"), T0),
    s.enqueue(job("c"), T0),
    s.enqueue(job("d"), T0, 2),
  ]);
  expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected"]);
  expect(String((results[1] as PromiseRejectedResult).reason)).toContain("UNIQUE");
  expect((await s.health("ep", T0, 60_000)).jobs.inQueue).toBe(3);
  expect((await s.claim("ep", "w", 5, T0)).map((j) => j.id)).toEqual(["a", "b", "c"]);
  await s.close();
});

test("sqlite: a write re-run after its group rolled back still records the worker as active", async () => {
  const s = SqliteStore.open(":memory:", { retention: RETENTION });
  const job = (id: string) => ({ id, endpointId: "ep", input: {}, policy, sync: false });
  await s.touchWorker("w", "ep", "k", T0 - 120_000, { runningIds: [], missingAfterMs: 1_000 });
  await s.enqueue(job("a"), T0 - 120_000);
  await s.touchWorker("w", "ep", "k", T0, { runningIds: [], missingAfterMs: 1_000 });
  // One group: the claim, and a duplicate id that rolls the group back; the claim is re-run alone.
  const [claimed, dup] = await Promise.allSettled([s.claim("ep", "w", 1, T0), s.enqueue(job("a"), T0)]);
  expect([claimed.status, dup.status]).toEqual(["fulfilled", "rejected"]);
  expect((await s.scalingStats("ep", T0, 600_000)).workers).toMatchObject([{ id: "w", running: 1, lastActive: T0 }]);
  await s.close();
});

test("sqlite: a stop owed to a worker is delivered after a restart and after a group that removed another rolled back", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  const job = (id: string, executionTimeout = 60_000) => ({
    id,
    endpointId: "ep",
    input: {},
    policy: { ...policy, executionTimeout },
    sync: false,
  });
  try {
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c"]) await s.enqueue(job(id), T0);
    await s.claim("ep", "w", 3, T0);
    await s.cancel("ep", "a", T0);
    await s.close();

    // Reopened: the stop written before is still owed, and a job's end removes its own.
    s = SqliteStore.open(dir, { retention: RETENTION });
    await s.finish("w", "c", { output: 1 }, false, T0 + 1);
    expect(await s.takeStops("w")).toEqual(["a"]);

    // Two stops owed: a timed-out run's and a cancelled one's.
    await s.enqueue(job("t", 1_000), T0 + 2);
    await s.claim("ep", "w", 1, T0 + 2);
    await s.touchWorker("w", "ep", "k", T0 + 2);
    await s.sweep(T0 + 1_002, 60_000);
    await s.cancel("ep", "b", T0 + 1_003);
    // One group: the retry (which removes the timed-out run's stop) and a duplicate id that rolls
    // the group back; the retry is re-run alone. The cancelled job's stop is still owed.
    const [retried, dup] = await Promise.allSettled([s.retry("ep", "t", T0 + 1_004), s.enqueue(job("a"), T0 + 1_004)]);
    expect([retried.status, dup.status]).toEqual(["fulfilled", "rejected"]);
    expect(await s.takeStops("w")).toEqual(["b"]);
    expect(await s.takeStops("w")).toEqual([]);
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a long input is kept beside the row, survives a restart, and goes with its job when it expires or is purged", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const short = { ...policy, ttl: 10_000 };
    const long = (n: number) => ({ data: String(n).repeat(5_000) });
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const [id, ep] of [
      ["a", "ep"],
      ["b", "ep"],
      ["c", "other"],
    ] as const)
      await s.enqueue({ id, endpointId: ep, input: long(id.length), policy: short, sync: false }, T0);
    await s.close();
    const rows = (ids: string) => {
      const db = new Database(join(dir, "spool.db"));
      const n = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM job_inputs WHERE job_id IN (${ids})`).get()!.n;
      const inline = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM jobs WHERE input = ''`).get()!.n;
      db.close();
      return [n, inline];
    };
    expect(rows("'a','b','c'")).toEqual([3, 3]);

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect((await s.claim("ep", "w", 1, T0))[0]?.input).toEqual(long(1));
    expect(await s.purgeQueue("ep", T0)).toBe(1);
    await s.sweep(T0 + 10_000, 60_000);
    expect(await s.get("other", "c", T0 + 10_000)).toBeNull();
    await s.close();
    expect(rows("'a','b','c'")).toEqual([0, 0]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a webhook call owed for a job keeps no copy of its input, long or short, whether it ended by a result or a cancel, and a long output goes whole", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const s = SqliteStore.open(dir, { retention: RETENTION });
    const long = { prompt: "i".repeat(1_000_000) }; // kept apart from its row
    const output = { image: "o".repeat(10_000), note: 'é😀\n"' };
    await s.enqueue({ id: "long", endpointId: "ep", input: long, webhook: "http://x/h", policy, sync: false }, T0);
    await s.enqueue({ id: "short", endpointId: "ep", input: { n: 1 }, webhook: "http://x/h", policy, sync: false }, T0);
    await s.enqueue({ id: "cancelled", endpointId: "ep", input: long, webhook: "http://x/h", policy, sync: false }, T0);
    await s.claim("ep", "w", 2, T0);
    await s.finish("w", "long", { output }, false, T0 + 1);
    await s.finish("w", "short", { output: 1 }, false, T0 + 1);
    await s.cancel("ep", "cancelled", T0 + 1);
    await s.close();
    const db = new Database(join(dir, "spool.db"));
    const copies = db.query<{ job_id: string; job: string }, []>("SELECT job_id, job FROM webhook_deliveries ORDER BY job_id").all();
    db.close();
    expect(copies.map((c) => c.job_id)).toEqual(["cancelled", "long", "short"]);
    for (const c of copies) expect("input" in JSON.parse(c.job)).toBe(false);
    expect(JSON.parse(copies[1]!.job).output).toEqual(output);
    expect(copies[1]!.job.length).toBeLessThan(20_000); // its other fields and its 10 KB output; the input is 1 MB
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: the write-ahead log is copied into the database file by the store's checkpoint thread", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const s = SqliteStore.open(dir, { retention: RETENTION });
    const file = join(dir, "spool.db");
    const before = statSync(file).size;
    // Far below the size at which the server's own connection would checkpoint (~40 MB of log):
    // only the checkpoint thread moves these pages into the file.
    for (let i = 0; i < 200; i++)
      await s.enqueue({ id: `j${i}`, endpointId: "ep", input: { pad: "x".repeat(2000) }, policy, sync: false }, T0);
    await until(() => statSync(file).size > before, "the checkpoint thread to copy the log into spool.db");
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: Idempotency-Keys past their ttl are removed by the sweep, whatever became of their jobs", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const s = SqliteStore.open(dir, { retention: RETENTION });
    const keyed = (id: string, key: string, ttlMs: number) => ({
      id,
      endpointId: "ep",
      input: {},
      policy,
      sync: false,
      keyId: "k",
      idempotency: { key, bodyHash: "h", ttlMs },
    });
    await s.enqueue(keyed("a", "short", 1_000), T0);
    await s.enqueue(keyed("b", "long", 5_000), T0);
    const kept = () => {
      const db = new Database(join(dir, "spool.db"));
      const keys = db
        .query<{ scope: string }, []>("SELECT scope FROM idempotency_keys ORDER BY scope")
        .all()
        .map((r) => r.scope.split("\n")[2]);
      db.close();
      return keys;
    };
    await s.sweep(T0 + 999, 60_000);
    expect(kept()).toEqual(["long", "short"]);
    await s.sweep(T0 + 1_000, 60_000);
    expect(kept()).toEqual(["long"]);
    await s.sweep(T0 + 5_000, 60_000);
    expect(kept()).toEqual([]);
    expect((await s.health("ep", T0 + 5_000, 60_000)).jobs.inQueue).toBe(2); // the jobs themselves live on
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a key written by schema 12 (removed with its job) is kept as long as its job, then is free", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const keyed = (id: string) => ({
      id,
      endpointId: "ep",
      input: {},
      policy: { ...policy, ttl: 10_000 },
      sync: false,
      keyId: "k",
      idempotency: { key: "order-1", bodyHash: "h", ttlMs: 86_400_000 },
    });
    let s = SqliteStore.open(dir, { retention: RETENTION });
    await s.enqueue(keyed("a"), T0);
    await s.close();
    const db = new Database(join(dir, "spool.db"));
    db.run(`DROP INDEX idempotency_keys_expiry; ALTER TABLE idempotency_keys DROP COLUMN expires_at;
      CREATE INDEX idempotency_keys_job ON idempotency_keys(job_id); ALTER TABLE jobs DROP COLUMN traceparent; PRAGMA user_version = 12;`);
    db.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect(await s.findByIdempotencyKey("k", "ep", "order-1", T0)).toMatchObject({ jobId: "a", expiresAt: T0 + 10_000 });
    expect((await s.enqueue(keyed("b"), T0 + 9_999)).id).toBe("a");
    expect((await s.enqueue(keyed("c"), T0 + 10_000)).id).toBe("c");
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
