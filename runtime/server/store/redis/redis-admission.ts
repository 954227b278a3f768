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
 * Sooner when another server was refused a slot: every WANTED_PERIODS trims a server holding
 * slots it did not use in the current period asks Redis whether one was, and if so gives those
 * back at once (a server bursting more often than once a second would otherwise keep them all).
 */
const TRIM_MS = 50;
const KEEP_PERIODS = 20;
const WANTED_PERIODS = 5;
/** Held slots, free or in use, are re-stamped this often, so that the ten-minute clean-up of a dead server's slots spares them. */
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
  /** Re-stamps held slots with `now` (adding any the clean-up removed: they are still held). */
  refresh(bucket: string, ids: string[], now: number): Promise<void>;
  /** Whether a server was refused a slot of `bucket` in the last second. */
  wanted(bucket: string): Promise<boolean>;
}

interface Bucket {
  windowStart: number;
  /** Counted in Redis for this window, not used yet. */
  tokens: number;
  /** Slot ids held in Redis and not in use. */
  free: string[];
  /** Slot ids held in Redis and in use. */
  inUse: Set<string>;
  /**
   * Slot ids asked for by a reservation whose answer never came (the connection dropped, Redis
   * did not answer in time): Redis may have granted them to nobody. Given back on the next trim.
   */
  unsure: string[];
  /** Trims since this bucket last asked whether its spare slots are wanted. */
  sinceAsked: number;
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
  #closed = false;
  /** The latest store time an admission brought, and performance.now() then: trims run on timers between admissions. */
  #lastNow = 0;
  #seenAt = 0;

  readonly #trimMs: number;

  /** `trimMs`: the trim period (TRIM_MS; tests shorten it). */
  constructor(backend: ReservationBackend, trimMs = TRIM_MS) {
    this.#backend = backend;
    this.#trimMs = trimMs;
  }

  async admit(name: string, limit: RequestLimit, windowMs: number, now: number): Promise<Admission> {
    let b = this.#buckets.get(name);
    if (!b) {
      b = {
        windowStart: -1,
        tokens: 0,
        free: [],
        inUse: new Set(),
        unsure: [],
        sinceAsked: 0,
        peak: 0,
        peaks: [],
        tokenChunk: 1,
        slotChunk: 1,
        lastTokensAt: -Infinity,
        lastSlotsAt: -Infinity,
        lastNow: now,
        refreshedAt: now,
      };
      this.#buckets.set(name, b);
    }
    b.lastNow = Math.max(b.lastNow, now);
    if (now >= this.#lastNow) {
      this.#lastNow = now;
      this.#seenAt = performance.now();
    }
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
      if (!b.pending) {
        const p = this.#reserve(b, name, limit, windowMs, now, start, needTokens, needSlot);
        const clear = () => {
          if (b.pending === p) b.pending = undefined;
        };
        b.pending = p;
        p.then(clear, clear); // runs before the waiters resume: they look again with it cleared
      }
      const got = await b.pending;
      if (needTokens && got.tokensRefused && got.windowStart === start && b.tokens === 0)
        return { ok: false, why: "window", retryAfterSeconds: got.retryAfterSeconds };
      if (needSlot && got.slotsRefused && b.free.length === 0) return { ok: false, why: "concurrent", retryAfterSeconds: 1 };
    }
    b.tokens--;
    if (!concurrent) return { ok: true, release: async () => {} };
    const slot = b.free.pop()!;
    b.inUse.add(slot);
    b.peak = Math.max(b.peak, b.inUse.size);
    const bucket = b;
    return {
      ok: true,
      release: async () => {
        // Once only; after close() the slot was given back with the rest.
        if (!bucket.inUse.delete(slot) || this.#closed) return;
        bucket.free.push(slot);
        this.#armTrim();
      },
    };
  }

  /** Asks Redis for a chunk of what the bucket lacks and adds what was granted. */
  async #reserve(
    b: Bucket,
    name: string,
    limit: RequestLimit,
    windowMs: number,
    now: number,
    start: number,
    needTokens: boolean,
    needSlot: boolean,
  ): Promise<Reservation> {
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
    let got: ReserveReply;
    try {
      got = await this.#backend.reserve({ bucket: name, limit, windowMs, now, tokens: needTokens ? b.tokenChunk : 0, slots: ids });
    } catch (err) {
      if (ids.length > 0) {
        b.unsure.push(...ids);
        this.#armTrim();
      }
      throw err;
    }
    if (b.windowStart === start) b.tokens += got.tokens;
    const granted = ids.slice(0, got.slots);
    if (this.#closed)
      void this.#backend.giveBack(name, granted).catch(() => {}); // closed while asking
    else if (granted.length > 0) {
      b.free.push(...granted);
      this.#armTrim();
    }
    const tokensRefused = needTokens && got.tokens === 0;
    return {
      windowStart: start,
      tokensRefused,
      // Redis does not try for slots when it refuses tokens: that says nothing about slots.
      slotsRefused: needSlot && (this.#closed || (!tokensRefused && got.slots === 0)),
      retryAfterSeconds: got.retryAfterSeconds,
    };
  }

  #armTrim(): void {
    if (this.#trimTimer || this.#closed) return;
    this.#trimTimer = setTimeout(() => void this.#trim(), this.#trimMs);
    this.#trimTimer.unref?.(); // held slots never keep a process alive; close() gives them back
  }

  /**
   * Gives back slots held beyond the most in use at once in the last second (or, when another
   * server wants them, beyond this period's use); re-stamps the rest now and then.
   */
  async #trim(): Promise<void> {
    this.#trimTimer = undefined;
    const now = this.#lastNow + (performance.now() - this.#seenAt);
    const work: Promise<void>[] = [];
    let holding = false;
    for (const [name, b] of this.#buckets) {
      b.peaks.push(b.peak);
      if (b.peaks.length > KEEP_PERIODS) b.peaks.shift();
      const surplus = Math.min(b.free.length, b.free.length + b.inUse.size - Math.max(...b.peaks));
      const spare = b.free.length + b.inUse.size - b.peak; // not used in this period
      b.peak = b.inUse.size;
      if (b.unsure.length > 0) work.push(this.#giveBack(name, b, b.unsure.splice(0)));
      if (surplus > 0) work.push(this.#giveBack(name, b, b.free.splice(0, surplus)));
      if (spare > Math.max(0, surplus) && ++b.sinceAsked >= WANTED_PERIODS) {
        b.sinceAsked = 0;
        work.push(this.#yieldIfWanted(name, b));
      }
      const held = [...b.free, ...b.inUse];
      if (held.length > 0 && now - b.refreshedAt >= REFRESH_MS) {
        b.refreshedAt = now;
        work.push(this.#backend.refresh(name, held, Math.round(now)));
      }
      if (held.length > 0 || b.unsure.length > 0) holding = true;
    }
    if (holding) this.#armTrim();
    await Promise.all(work.map((p) => p.catch(() => {})));
  }

  /**
   * Gives slots back. When Redis does not answer, they may or may not have gone: they are kept
   * as unsure and given back again on the next trim (a slot given back twice is no harm).
   */
  async #giveBack(name: string, b: Bucket, ids: string[]): Promise<void> {
    try {
      await this.#backend.giveBack(name, ids);
    } catch (err) {
      if (!this.#closed) {
        b.unsure.push(...ids);
        this.#armTrim();
      }
      throw err;
    }
  }

  /** Gives the free slots not used in this period back when a server was refused one. */
  async #yieldIfWanted(name: string, b: Bucket): Promise<void> {
    if (!(await this.#backend.wanted(name))) return;
    const spare = Math.min(b.free.length, b.free.length + b.inUse.size - b.peak);
    if (spare <= 0) return;
    b.peaks = [];
    await this.#giveBack(name, b, b.free.splice(0, spare));
  }

  /** Gives every held slot back, those still in use too (the server is stopping). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#trimTimer);
    this.#trimTimer = undefined;
    const held = [...this.#buckets].map(([name, b]): [string, string[]] => [
      name,
      [...b.free.splice(0), ...b.inUse, ...b.unsure.splice(0)],
    ]);
    for (const b of this.#buckets.values()) b.inUse.clear();
    await Promise.all(held.filter(([, ids]) => ids.length > 0).map(([name, ids]) => this.#backend.giveBack(name, ids).catch(() => {})));
  }
}

const chunkCap = (limit: number, max: number) => Math.max(1, Math.min(max, Math.floor(limit / 8)));
