import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../runtime/clock.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { MemoryLog } from "../../runtime/log.ts";
import { createApp } from "../../runtime/server/app.ts";
import { JobEvents } from "../../runtime/server/jobs/job-events.ts";
import { LocalFileStore } from "../../runtime/server/files/file-store.ts";
import { EndpointStatsRecorder } from "../../runtime/server/metrics/endpoint-stats.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { SqliteStore } from "../../runtime/server/store/sqlite/sqlite-store.ts";

test("an unexpected failure answers a generic 500 with a request id and is logged with it, without internals", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-errors-"));
  try {
    const store = SqliteStore.open(":memory:", { retention: { syncMs: 60_000, asyncMs: 1_800_000 } });
    const { key } = await createKey(store, "t", Date.now());
    // The store fails in a way no route expects (a disk error, say).
    store.health = async () => {
      throw new Error("SQLITE_IOERR: disk I/O error at /secret/path/spool.db");
    };
    const log = new MemoryLog();
    const files = new LocalFileStore(dir, 60_000);
    const config = parseConfig({ endpoints: { echo: {} } });
    const jobEvents = new JobEvents();
    const app = createApp({
      store,
      config,
      clock: systemClock,
      log,
      files,
      localFiles: files,
      jobEvents,
      stats: new EndpointStatsRecorder(jobEvents, systemClock),
    });

    const res = await app.request("/v2/echo/health", { headers: { authorization: `Bearer ${key}`, "x-request-id": "req-123" } });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: "internal server error (request id req-123)" });
    expect(text).not.toContain("SQLITE");
    const logged = log.lines.map((l) => JSON.parse(l));
    expect(logged).toEqual([
      expect.objectContaining({
        level: "error",
        requestId: "req-123",
        path: "/v2/echo/health",
        error: expect.stringContaining("SQLITE_IOERR"),
      }),
    ]);
    expect(log.lines.join("\n")).not.toContain(key);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
