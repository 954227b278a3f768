import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../../runtime/server/store/sqlite-store.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";

runStoreSuite("sqlite", async () => SqliteStore.open(":memory:", { retention: RETENTION }));

test("sqlite: counts and queue order kept in memory are rebuilt from the file when it is opened again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-sqlite-"));
  try {
    const T0 = 1_790_000_000_000;
    const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
    let s = SqliteStore.open(dir, { retention: RETENTION });
    for (const id of ["a", "b", "c", "d"]) await s.enqueue({ id, endpointId: "ep", input: {}, policy: { ...policy, lowPriority: id === "d" }, sync: false }, T0);
    await s.claim("ep", "w", 1, T0);
    await s.cancel("ep", "b", T0);
    await s.close();

    s = SqliteStore.open(dir, { retention: RETENTION });
    expect((await s.health("ep", T0, 60_000)).jobs).toEqual({ completed: 0, failed: 0, inProgress: 1, inQueue: 2, retried: 0 });
    expect(await Promise.all(["a", "b", "c", "d"].map((id) => s.queuePosition("ep", id, T0)))).toEqual([null, null, 0, 1]);
    expect((await s.scalingStats("ep", T0, 60_000))).toMatchObject({ queued: 1, queuedLowPriority: 1, inProgress: 1, oldestQueuedAt: T0 });
    await s.enqueue({ id: "e", endpointId: "ep", input: {}, policy, sync: false }, T0 + 1);
    expect((await s.claim("ep", "w", 5, T0 + 1)).map((j) => j.id)).toEqual(["c", "d", "e"]);
    await s.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
