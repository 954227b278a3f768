import type { Admission, RequestLimit } from "../store.ts";

/** Reservations double while they run out this fast (store clock), up to an eighth of the limit. */
const BURST_MS = 50;
const MAX_TOKENS = 256;
const MAX_SLOTS = 64;
/** Slots held and not used for this long (real time) go back to the other servers. */
const TRIM_MS = 50;
/** Held slots are re-stamped this often, so that the ten-minute clean-up of a dead server's slots spares them. */
const REFRESH_MS = 60_000;

/** What one admission round trip asks: tokens of the current window and concurrent slots. */
export interface ReserveRequest {
  bucket: string;
  limit: RequestLimit;
  windowMs: number;
  now: number;
  tokens: number;
  /** Ids of the slots wanted (as many as asked for). */
  slots: string[];
}

/** What Redis granted: tokens, the first `slots` ids asked for, and the window's Retry-After. */
export interface ReserveReply {
  tokens: number;
  slots: number;
  retryAfterSeconds: number;
}

export interface ReservationBackend {
  reserve(r: ReserveRequest): Promise<ReserveReply>;
  /** Gives held slots back (removes them in Redis). */
  giveBack(bucket: string, ids: string[]): Promise<void>;
  /** Re-stamps held slots with `now`. */
  refresh(bucket: string, ids: string[], now: number): Promise<void>;
}

interface Bucket {
  windowStart: number;
  /** Counted in Redis for this window, not used yet. */
  tokens: number;
  /** Slot ids held in Redis and not in use. */
  free: string[];
  inUse: number;
  /** Most slots in use since the last trim. */
  peak: number;
  tokenChunk: number;
  slotChunk: number;
  lastReserveAt: number;
  lastNow: number;
  refreshedAt: number;
}

/**
 * Request admission for several servers sharing one Redis, counted there without a round trip
 * per request: a server reserves window tokens and concurrent slots in Redis in small chunks
 * (one at first, doubling while it uses them up quickly, halving when it does not) and admits locally while it holds some.
 * Redis's counts include what servers reserved, so the limits are never exceeded across servers;
 * a server may refuse slightly early while another holds reserved tokens or slots (slots unused
 * for TRIM_MS go back). One server alone is exact: its refusal needs every token or slot used.
 */
export class ReservedAdmission {
  readonly #buckets = new Map<string, Bucket>();
  readonly #backend: ReservationBackend;
  readonly #server = crypto.randomUUID().slice(0, 8);
  #nextSlot = 0;
  #trimTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(backend: ReservationBackend) {
    this.#backend = backend;
  }

  async admit(name: string, limit: RequestLimit, windowMs: number, now: number): Promise<Admission> {
    let b = this.#buckets.get(name);
    if (!b) {
      b = { windowStart: -1, tokens: 0, free: [], inUse: 0, peak: 0, tokenChunk: 1, slotChunk: 1, lastReserveAt: -Infinity, lastNow: now, refreshedAt: now };
      this.#buckets.set(name, b);
    }
    b.lastNow = Math.max(b.lastNow, now);
    let start = now - (now % windowMs);
    if (b.windowStart !== start) {
      b.windowStart = start;
      b.tokens = 0; // what was left of another window lapses with it
    }
    const concurrent = limit.concurrent !== undefined;
    // Other admissions run while this one waits on Redis and may use what it saw free: it asks
    // again, and refuses only for what Redis itself would not grant.
    for (;;) {
      if (b.windowStart !== start) {
        // Another admission moved the window on while this one waited: it counts in that one.
        start = b.windowStart;
        now = Math.max(now, b.lastNow);
      }
      const needTokens = b.tokens === 0;
      const needSlot = concurrent && b.free.length === 0;
      if (!needTokens && !needSlot) break;
      const burst = now - b.lastReserveAt < BURST_MS;
      b.lastReserveAt = now;
      // Doubled while used up quickly, halved otherwise (a pause in a steady stream costs little).
      if (needTokens) b.tokenChunk = Math.min(burst ? b.tokenChunk * 2 : Math.ceil(b.tokenChunk / 2), chunkCap(limit.requests, MAX_TOKENS));
      if (needSlot) b.slotChunk = Math.min(burst ? b.slotChunk * 2 : Math.ceil(b.slotChunk / 2), chunkCap(limit.concurrent!, MAX_SLOTS));
      const ids = needSlot ? Array.from({ length: b.slotChunk }, () => `${this.#server}:${this.#nextSlot++}`) : [];
      const got = await this.#backend.reserve({ bucket: name, limit, windowMs, now, tokens: needTokens ? b.tokenChunk : 0, slots: ids });
      if (b.windowStart === start) b.tokens += got.tokens;
      b.free.push(...ids.slice(0, got.slots));
      if (got.slots > 0) this.#armTrim();
      if (needTokens && got.tokens === 0 && b.tokens === 0) return { ok: false, why: "window", retryAfterSeconds: got.retryAfterSeconds };
      if (needSlot && got.slots === 0 && b.free.length === 0) return { ok: false, why: "concurrent", retryAfterSeconds: 1 };
    }
    b.tokens--;
    if (!concurrent) return { ok: true, release: async () => {} };
    const slot = b.free.pop()!;
    b.inUse++;
    b.peak = Math.max(b.peak, b.inUse);
    let released = false;
    const bucket = b;
    return {
      ok: true,
      release: async () => {
        if (released) return;
        released = true;
        bucket.inUse--;
        bucket.free.push(slot);
        this.#armTrim();
      },
    };
  }

  #armTrim(): void {
    if (this.#trimTimer) return;
    this.#trimTimer = setTimeout(() => void this.#trim(), TRIM_MS);
    this.#trimTimer.unref?.(); // held slots never keep a process alive; close() gives them back
  }

  /** Gives back slots held beyond what was in use since the last trim; re-stamps the rest now and then. */
  async #trim(): Promise<void> {
    this.#trimTimer = undefined;
    const work: Promise<void>[] = [];
    let holding = false;
    for (const [name, b] of this.#buckets) {
      const surplus = Math.min(b.free.length, b.free.length + b.inUse - b.peak);
      b.peak = b.inUse;
      if (surplus > 0) work.push(this.#backend.giveBack(name, b.free.splice(0, surplus)));
      const held = [...b.free];
      if (held.length > 0 && b.lastNow - b.refreshedAt >= REFRESH_MS) {
        b.refreshedAt = b.lastNow;
        work.push(this.#backend.refresh(name, held, b.lastNow));
      }
      if (b.free.length > 0 || b.inUse > 0) holding = true;
    }
    if (holding) this.#armTrim();
    // A slot that could not be given back is freed by the ten-minute clean-up.
    await Promise.all(work.map((p) => p.catch(() => {})));
  }

  /** Gives every held slot back (the server is stopping). */
  async close(): Promise<void> {
    clearTimeout(this.#trimTimer);
    this.#trimTimer = undefined;
    await Promise.all([...this.#buckets].filter(([, b]) => b.free.length > 0).map(([name, b]) => this.#backend.giveBack(name, b.free.splice(0)).catch(() => {})));
  }
}

const chunkCap = (limit: number, max: number) => Math.max(1, Math.min(max, Math.floor(limit / 8)));
