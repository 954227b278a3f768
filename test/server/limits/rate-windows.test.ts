import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createStore } from "../../../runtime/server/store/create-store.ts";

// The embedded store's request windows outlive the process: closed and opened again inside a
// window, it goes on counting from where it was; the next window starts from zero.

const WINDOW = 10_000;
const LIMIT = { requests: 3, concurrent: 2 };
const open = (dir: string) => createStore(dir, { retention: { syncMs: 60_000, asyncMs: 60_000 } });

test("a reopened embedded store keeps each window's count until the window ends", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-windows-"));
  try {
    const t0 = 1_700_000_000_000; // a window boundary
    let store = await open(dir);
    const admitted = [];
    for (let i = 0; i < 3; i++) {
      const a = await store.admitRequest("echo:run", LIMIT, WINDOW, t0 + i);
      if (a.ok) await a.release();
      admitted.push(a.ok);
    }
    expect(admitted).toEqual([true, true, true]);
    expect(await store.admitRequest("echo:status", LIMIT, WINDOW, t0)).toMatchObject({ ok: true });
    await store.close();

    store = await open(dir);
    expect(await store.admitRequest("echo:run", LIMIT, WINDOW, t0 + 5_000)).toEqual({ ok: false, why: "window", retryAfterSeconds: 5 });
    // Other buckets kept their own counts (one of three used).
    expect(await store.admitRequest("echo:status", LIMIT, WINDOW, t0 + 1)).toMatchObject({ ok: true });
    expect(await store.admitRequest("echo:status", LIMIT, WINDOW, t0 + 2)).toMatchObject({ ok: true });
    expect(await store.admitRequest("echo:status", LIMIT, WINDOW, t0 + 3)).toMatchObject({ ok: false });
    // The next window starts from zero, and so does a different window length.
    expect(await store.admitRequest("echo:run", LIMIT, WINDOW, t0 + WINDOW)).toMatchObject({ ok: true });
    await store.close();

    store = await open(dir);
    expect(await store.admitRequest("echo:run", LIMIT, WINDOW, t0 + WINDOW + 1)).toMatchObject({ ok: true });
    expect(await store.admitRequest("echo:run", LIMIT, 2 * WINDOW, t0 + WINDOW + 2)).toMatchObject({ ok: true });
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
