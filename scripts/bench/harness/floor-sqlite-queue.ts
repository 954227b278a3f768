import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { FloorJob, FloorQueue } from "./floor-queue.ts";

type Write = { run: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/**
 * The durable floor's queue: bun:sqlite in WAL mode with synchronous = NORMAL (as the embedded
 * store), one row a job, and group commit: every write asked for in one turn of the event loop
 * shares one transaction, and each is answered after its COMMIT. A take is a write too (the job
 * is marked taken before it is handed out). Nothing else: no index but the queue's, no expiry,
 * no checks. The least a server that answers only after its writes are durable costs here.
 */
export function sqliteQueue(dir: string): FloorQueue {
  const db = new Database(join(dir, "floor.db"), { create: true, strict: true });
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA synchronous = NORMAL");
  db.run("CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, state INTEGER NOT NULL, result TEXT)");
  db.run("CREATE INDEX IF NOT EXISTS queued ON jobs (seq) WHERE state = 0");
  const insert = db.query("INSERT INTO jobs (seq, body, state) VALUES (?, ?, ?)");
  const take = db.query(
    "UPDATE jobs SET state = 1 WHERE seq IN (SELECT seq FROM jobs WHERE state = 0 ORDER BY seq LIMIT ?) RETURNING body",
  );
  const finish = db.query("UPDATE jobs SET state = 2, result = ? WHERE seq = ?");
  const depth = db.query("SELECT count(*) AS n FROM jobs WHERE state = 0");
  const begin = db.query("BEGIN IMMEDIATE");
  const commit = db.query("COMMIT");

  let batch: Write[] = [];
  const rollback = db.query("ROLLBACK");
  const flush = () => {
    const writes = batch;
    batch = [];
    const out: unknown[] = [];
    try {
      begin.run();
      for (const w of writes) out.push(w.run());
      commit.run();
    } catch (error) {
      // The floor has no refusals: a failed write fails its whole group, which changes nothing.
      if (db.inTransaction) rollback.run();
      for (const w of writes) w.reject(error);
      return;
    }
    writes.forEach((w, i) => w.resolve(out[i]));
  };
  const write = <T>(run: () => T): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      batch.push({ run, resolve: resolve as (v: unknown) => void, reject });
      if (batch.length === 1) setImmediate(flush);
    });
  const seqOf = (id: string) => Number(id.slice(id.lastIndexOf("-") + 1));

  return {
    push: (job: FloorJob) => write(() => void insert.run(seqOf(job.id), JSON.stringify(job), 0)),
    hand: (job: FloorJob) => write(() => void insert.run(seqOf(job.id), JSON.stringify(job), 1)),
    take: (n) => write(() => (take.all(n) as { body: string }[]).map((r) => r.body)),
    done: (id, result) => write(() => void finish.run(result, seqOf(id))),
    depth: () => (depth.get() as { n: number }).n,
  };
}
