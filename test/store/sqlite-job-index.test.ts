import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { SCHEMA } from "../../runtime/server/store/sqlite/sqlite-schema.ts";
import { JobIndex } from "../../runtime/server/store/sqlite/sqlite-job-index.ts";
import type { StoredJob } from "../../runtime/server/store/store.ts";

test("the count of queued jobs kept as written (the bound on their memory) follows adds, takes, drops and a rebuild on every endpoint", () => {
  const db = new Database(":memory:");
  db.run(SCHEMA);
  const index = new JobIndex(db);
  const written = {} as StoredJob; // only its presence is counted
  const model = new Map<string, boolean>(); // "endpoint/seq" -> kept as written
  let seed = 7;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let step = 0; step < 5_000; step++) {
    const ep = `ep${Math.floor(rand() * 3)}`;
    const seq = 1 + Math.floor(rand() * 300);
    const key = `${ep}/${seq}`;
    const r = rand();
    if (r < 0.5) {
      const keep = rand() < 0.7;
      index.queued(ep, null, {
        id: key,
        seq,
        expiresAt: 0,
        queuedAt: 0,
        lowPriority: false,
        rid: seq,
        fresh: true,
        written: keep ? written : undefined,
      });
      if (!model.has(key)) model.set(key, keep); // a seq already queued stays as it was
    } else if (r < 0.8) {
      if (!model.has(key)) continue;
      index.unqueued(ep, seq, "IN_PROGRESS");
      model.delete(key);
    } else {
      index.forget(ep, seq);
      model.delete(key);
    }
    expect(index.keeping).toBe([...model.values()].filter(Boolean).length);
  }
  expect(index.keeping).toBeGreaterThan(0);
  index.rebuild(); // read back from the table: nothing kept as written
  expect(index.keeping).toBe(0);
});
