import type { Admission, RequestLimit } from "../store.ts";
import type { RateWindow, RateWindowStore } from "./sqlite-rate-windows.ts";

/** How often a counter with a RateWindowStore writes the windows that changed. */
const SAVE_EVERY_MS = 100;

/**
 * Request counting for a store that one server owns: fixed windows of `windowMs` aligned to the
 * clock, plus a count of requests in flight. Counting is in memory; with a RateWindowStore the
 * windows that changed are written at most every 100 ms (off the request path) and at close,
 * and read back at start, so a restart inside a window keeps its count. A crash loses at most
 * the admissions of its last 100 ms; requests in flight end with the process anyway.
 */
export class LocalRequestCounter {
  readonly #windows = new Map<string, { start: number; windowMs: number; count: number }>();
  readonly #inFlight = new Map<string, number>();
  readonly #saved: RateWindowStore | undefined;
  readonly #changed = new Set<string>();
  #saveTimer: ReturnType<typeof setTimeout> | undefined;
  #lastNow = 0;

  constructor(saved?: RateWindowStore) {
    this.#saved = saved;
    for (const w of saved?.load() ?? []) this.#windows.set(w.bucket, { start: w.start, windowMs: w.windowMs, count: w.count });
  }

  admit(bucket: string, limit: RequestLimit, windowMs: number, now: number): Admission {
    const start = now - (now % windowMs);
    let window = this.#windows.get(bucket);
    if (!window || window.start !== start || window.windowMs !== windowMs)
      this.#windows.set(bucket, (window = { start, windowMs, count: 0 }));
    if (window.count >= limit.requests) {
      return { ok: false, why: "window", retryAfterSeconds: Math.max(1, Math.ceil((start + windowMs - now) / 1000)) };
    }
    const inFlight = this.#inFlight.get(bucket) ?? 0;
    if (limit.concurrent !== undefined && inFlight >= limit.concurrent) return { ok: false, why: "concurrent", retryAfterSeconds: 1 };
    window.count++;
    this.#inFlight.set(bucket, inFlight + 1);
    if (this.#saved) this.#changedAt(bucket, now);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        const n = (this.#inFlight.get(bucket) ?? 1) - 1;
        if (n > 0) this.#inFlight.set(bucket, n);
        else this.#inFlight.delete(bucket);
      },
    };
  }

  /** Writes the windows not yet saved; the store calls it before closing. */
  close(): void {
    clearTimeout(this.#saveTimer);
    this.#saveTimer = undefined;
    this.#save();
  }

  #changedAt(bucket: string, now: number): void {
    this.#changed.add(bucket);
    this.#lastNow = Math.max(this.#lastNow, now);
    if (this.#saveTimer) return;
    this.#saveTimer = setTimeout(() => {
      this.#saveTimer = undefined;
      this.#save();
    }, SAVE_EVERY_MS);
    this.#saveTimer.unref?.();
  }

  #save(): void {
    if (!this.#saved || this.#changed.size === 0) return;
    const windows: RateWindow[] = [];
    for (const bucket of this.#changed) {
      const w = this.#windows.get(bucket);
      if (w) windows.push({ bucket, ...w });
    }
    this.#changed.clear();
    this.#saved.save(windows, this.#lastNow);
  }
}
