import type { Admission, RequestLimit } from "../store.ts";

/**
 * Window tokens are reserved in chunks that double while a chunk runs out within TOKENS_GROW_MS
 * (store clock) and halve once one lasted TOKENS_SHRINK_MS or longer, up to an eighth of the
 * limit: a steady stream asks Redis a few times a second at most, whatever its rate.
 */
const TOKENS_GROW_MS = 250;
const TOKENS_SHRINK_MS = 2_000;
/** Concurrent slots double while they run out this fast, and halve otherwise. */
const SLOTS_BURST_MS = 50;
const MAX_TOKENS = 256;
const MAX_SLOTS = 64;
/**
 * Every TRIM_MS a server gives back the slots it holds beyond the most it had in use at once in
 * the last KEEP_PERIODS of these periods (one second): a steady load keeps the slots it goes
 * back and forth over, and what a burst took returns to the other servers a second later.
 */
const TRIM_MS = 50;
const KEEP_PERIODS = 20;
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
  /** The peaks of the last KEEP_PERIODS trims. */
  peaks: number[];
  tokenChunk: number;
  slotChunk: number;
  lastTokensAt: number;
  lastSlotsAt: number;
  lastNow: number;
  refreshedAt: number;
  /** The reservation in flight, if any. */
  pending?: Promise<Reservation>;
}

/** What Redis refused outright to a reservation, and for which window. */
interface Reservation {
  windowStart: number;
  tokensRefused: boolean;
  slotsRefused: boolean;
  retryAfterSeconds: number;
}

/**
 * Request admission for several servers sharing one Redis, counted there without a round trip
 * per request: a server reserves window tokens and concurrent slots in Redis in small chunks
 * (one at first, growing while it uses them up quickly, shrinking when it does not) and admits locally while it holds some.
 * Redis's counts include what servers reserved, so the limits are never exceeded across servers;
 * a server may refuse slightly early while another holds reserved tokens or slots (slots unused
 * for a second go back). One server alone is exact: its refusal needs every token or slot used.
 */
export class ReservedAdmission {
  readonly #buckets = new Map<string, Bucket>();
  readonly #backend: ReservationBackend;
  readonly #server = crypto.randomUUID().slice(0, 8);
  #nextSlot = 0;
  #trimTimer: ReturnType<typeof setTimeout> | undefined;

  readonly #trimMs: number;

  /** `trimMs`: the trim period (TRIM_MS; tests shorten it). */
  constructor(backend: ReservationBackend, trimMs = TRIM_MS) {
    this.#backend = backend;
    this.#trimMs = trimMs;
  }

  async admit(name: string, limit: RequestLimit, windowMs: number, now: number): Promise<Admission> {
    let b = this.#buckets.get(name);
    if (!b) {
      b = { windowStart: -1, tokens: 0, free: [], inUse: 0, peak: 0, peaks: [], tokenChunk: 1, slotChunk: 1, lastTokensAt: -Infinity, lastSlotsAt: -Infinity, lastNow: now, refreshedAt: now };
      this.#buckets.set(name, b);
    }
    b.lastNow = Math.max(b.lastNow, now);
    let start = now - (now % windowMs);
    if (b.windowStart !== start) {
      b.windowStart = start;
      b.tokens = 0; // what was left of another window lapses with it
    }
    const concurrent = limit.concurrent !== undefined;
    // Other admissions run while this one waits on Redis and may use what it saw free: it looks
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
      // One reservation in flight per bucket: admissions arriving together wait for it and look
      // again, rather than each taking a chunk (and a round trip) of its own.
      const mine = !b.pending;
      if (mine) b.pending = this.#reserve(b, name, limit, windowMs, now, start, needTokens, needSlot);
      const got = await b.pending!;
      if (needTokens && got.tokensRefused && got.windowStart === start && b.tokens === 0) return { ok: false, why: "window", retryAfterSeconds: got.retryAfterSeconds };
      if (needSlot && got.slotsRefused && b.free.length === 0) return { ok: false, why: "concurrent", retryAfterSeconds: 1 };
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

  /** Asks Redis for a chunk of what the bucket lacks and adds what was granted; clears b.pending. */
  async #reserve(b: Bucket, name: string, limit: RequestLimit, windowMs: number, now: number, start: number, needTokens: boolean, needSlot: boolean): Promise<Reservation> {
    try {
      if (needTokens) {
        const lasted = now - b.lastTokensAt;
        b.lastTokensAt = now;
        const chunk = lasted < TOKENS_GROW_MS ? b.tokenChunk * 2 : lasted >= TOKENS_SHRINK_MS ? Math.ceil(b.tokenChunk / 2) : b.tokenChunk;
        b.tokenChunk = Math.min(chunk, chunkCap(limit.requests, MAX_TOKENS));
      }
      if (needSlot) {
        const burst = now - b.lastSlotsAt < SLOTS_BURST_MS;
        b.lastSlotsAt = now;
        b.slotChunk = Math.min(burst ? b.slotChunk * 2 : Math.ceil(b.slotChunk / 2), chunkCap(limit.concurrent!, MAX_SLOTS));
      }
      const ids = needSlot ? Array.from({ length: b.slotChunk }, () => `${this.#server}:${this.#nextSlot++}`) : [];
      const got = await this.#backend.reserve({ bucket: name, limit, windowMs, now, tokens: needTokens ? b.tokenChunk : 0, slots: ids });
      if (b.windowStart === start) b.tokens += got.tokens;
      b.free.push(...ids.slice(0, got.slots));
      if (got.slots > 0) this.#armTrim();
      return {
        windowStart: start,
        tokensRefused: needTokens && got.tokens === 0,
        slotsRefused: needSlot && got.slots === 0,
        retryAfterSeconds: got.retryAfterSeconds,
      };
    } finally {
      b.pending = undefined;
    }
  }

  #armTrim(): void {
    if (this.#trimTimer) return;
    this.#trimTimer = setTimeout(() => void this.#trim(), this.#trimMs);
    this.#trimTimer.unref?.(); // held slots never keep a process alive; close() gives them back
  }

  /** Gives back slots held beyond the most in use at once in the last second; re-stamps the rest now and then. */
  async #trim(): Promise<void> {
    this.#trimTimer = undefined;
    const work: Promise<void>[] = [];
    let holding = false;
    for (const [name, b] of this.#buckets) {
      b.peaks.push(b.peak);
      if (b.peaks.length > KEEP_PERIODS) b.peaks.shift();
      const surplus = Math.min(b.free.length, b.free.length + b.inUse - Math.max(...b.peaks));
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
