import type { Database } from "bun:sqlite";

/** One bucket's fixed window: when it started, how long it lasts, how many requests it admitted. */
export interface RateWindow {
  bucket: string;
  start: number;
  windowMs: number;
  count: number;
}

/** Where a request counter keeps its windows across restarts. */
export interface RateWindowStore {
  /** Every window kept (the counter ignores those that have closed). */
  load(): RateWindow[];
  /** Writes these windows (one transaction) and forgets those closed at `now`. */
  save(windows: RateWindow[], now: number): void;
}

/**
 * Rate windows in the embedded store's database, in a table of their own (not part of the job
 * schema: losing it costs at most one window of limits).
 */
export class SqliteRateWindows implements RateWindowStore {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    db.run(
      "CREATE TABLE IF NOT EXISTS rate_windows (bucket TEXT PRIMARY KEY, start INTEGER NOT NULL, window_ms INTEGER NOT NULL, count INTEGER NOT NULL) STRICT",
    );
  }

  load(): RateWindow[] {
    return this.#db.query<RateWindow, []>("SELECT bucket, start, window_ms AS windowMs, count FROM rate_windows").all();
  }

  save(windows: RateWindow[], now: number): void {
    const upsert = this.#db.query<unknown, [string, number, number, number]>(
      "INSERT INTO rate_windows (bucket, start, window_ms, count) VALUES (?, ?, ?, ?) ON CONFLICT (bucket) DO UPDATE SET start = excluded.start, window_ms = excluded.window_ms, count = excluded.count",
    );
    const prune = this.#db.query<unknown, [number]>("DELETE FROM rate_windows WHERE start + window_ms <= ?");
    this.#db.transaction(() => {
      for (const w of windows) upsert.run(w.bucket, w.start, w.windowMs, w.count);
      prune.run(now);
    })();
  }
}
