import type { StoredJob } from "../store.ts";

/** A queued job as the in-memory queue keeps it. */
export interface QueuedEntry {
  id: string;
  seq: number;
  expiresAt: number;
  queuedAt: number;
  lowPriority: boolean;
  /** The job's rowid (its place in the list of an endpoint's jobs, newest first). */
  rid: number;
  /**
   * Queued since its submission, never retried: its seq and its rowid were given together, so every
   * job behind it in the queue was submitted before it (a retry queues a job again at the back).
   */
  fresh: boolean;
  /**
   * The job as its submission wrote it (expiresAt aside, which the entry keeps), so that a claim
   * need not read its row back: only for a job whose row holds its input and that found a short
   * queue (memory stays bounded at any backlog); none for one read back from the table.
   */
  written?: StoredJob;
}

const MIN_SLOTS = 1024;

/**
 * The queued jobs of one endpoint in claim order (by seq), with rank: a Fenwick tree over slots,
 * each slot holding one seq in ascending order, so add, delete, rank (the queue position) and
 * k-th are O(log n) at any backlog. New jobs take the next slot (seqs only grow); a job re-queued
 * after a worker loss keeps its seq and finds its old slot again. When the slots run out, or a
 * seq has no slot in its place (its slot was packed away while it ran), the live ones are packed
 * into a new array twice their number, once before the next read however many came back: O(n)
 * amortised, and memory follows the number of queued jobs, never the range of their seqs (one
 * old job queued while millions pass through other endpoints costs one slot).
 */
export class SeqQueue {
  /** The seq of each slot, ascending; a slot whose job left keeps its seq and counts 0. */
  #seqs = new Float64Array(MIN_SLOTS);
  /** Slots handed out: [0, #used). */
  #used = 0;
  #tree = new Int32Array(MIN_SLOTS + 1); // 1-based over slots
  readonly #entries = new Map<number, QueuedEntry>();
  /** Seqs of entries with no slot yet (none had their place): packed in before the tree is read. */
  #pending: number[] = [];

  /** Entries with lowPriority (they do not scale workers up). */
  lowPriority = 0;

  get size(): number {
    return this.#entries.size;
  }

  /** Slots held in memory (for tests: it follows the number of entries, not their seqs). */
  get capacity(): number {
    return this.#seqs.length;
  }

  get(seq: number): QueuedEntry | undefined {
    return this.#entries.get(seq);
  }

  add(entry: QueuedEntry): void {
    const { seq } = entry;
    if (this.#entries.has(seq)) return;
    this.#entries.set(seq, entry);
    if (entry.lowPriority) this.lowPriority++;
    const at = this.#lowerBound(seq);
    if (at < this.#used && this.#seqs[at] === seq) return this.#update(at + 1, 1); // its old slot
    if (at === this.#used && at < this.#seqs.length) {
      this.#seqs[this.#used++] = seq;
      return this.#update(this.#used, 1);
    }
    this.#pending.push(seq); // packed with any others that come back before the next read
  }

  delete(seq: number): boolean {
    const entry = this.#entries.get(seq);
    if (!entry) return false;
    if (this.#pending.length) this.#pack();
    this.#entries.delete(seq);
    if (entry.lowPriority) this.lowPriority--;
    this.#update(this.#lowerBound(seq) + 1, -1);
    return true;
  }

  /** How many queued entries come before `seq`. */
  rank(seq: number): number {
    if (this.#pending.length) this.#pack();
    return this.#prefix(this.#lowerBound(seq));
  }

  /** The entries in claim order, from the front; stop iterating to stop the walk. */
  *inOrder(): Generator<QueuedEntry> {
    if (this.#pending.length) this.#pack();
    for (let k = 1; k <= this.#entries.size; k++) {
      const slot = this.#kth(k);
      if (slot === undefined) return;
      yield this.#entries.get(this.#seqs[slot]!)!;
    }
  }

  /**
   * The entries whose seq is below `before`, newest (highest seq) first; stop iterating to stop
   * the walk. A queue is taken from its front, so its newest entries are live and come first.
   */
  *newestFirst(before = Infinity): Generator<QueuedEntry> {
    if (this.#pending.length) this.#pack();
    for (let i = this.#lowerBound(before) - 1; i >= 0; i--) {
      const entry = this.#entries.get(this.#seqs[i]!);
      if (entry) yield entry;
    }
  }

  /** The first slot whose seq is `seq` or more (#used when none). */
  #lowerBound(seq: number): number {
    const s = this.#seqs;
    let lo = 0;
    let hi = this.#used;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (s[mid]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The slot (0-based) of the k-th (1-based) entry in claim order. */
  #kth(k: number): number | undefined {
    const t = this.#tree;
    const n = t.length - 1;
    let pos = 0;
    let step = 1;
    while (step * 2 <= n) step *= 2;
    for (; step > 0; step >>= 1) {
      const next = pos + step;
      if (next <= n && t[next]! < k) {
        pos = next;
        k -= t[next]!;
      }
    }
    return pos < this.#used ? pos : undefined;
  }

  #update(i: number, delta: number): void {
    const t = this.#tree;
    for (; i < t.length; i += i & -i) t[i]! += delta;
  }

  #prefix(i: number): number {
    let sum = 0;
    for (const t = this.#tree; i > 0; i -= i & -i) sum += t[i]!;
    return sum;
  }

  /**
   * Packs every entry's seq, in order, into new slots with as many free after them: the slots
   * still in use (already in order) merged with the pending seqs (sorted), O(n).
   */
  #pack(): void {
    const pending = this.#pending.sort((a, b) => a - b);
    this.#pending = [];
    const seqs: number[] = [];
    let p = 0;
    for (let i = 0; i < this.#used; i++) {
      const slot = this.#seqs[i]!;
      if (!this.#entries.has(slot)) continue;
      while (p < pending.length && pending[p]! < slot) seqs.push(pending[p++]!);
      seqs.push(slot);
    }
    while (p < pending.length) seqs.push(pending[p++]!);
    let cap = MIN_SLOTS;
    while (cap < 2 * seqs.length) cap *= 2;
    this.#seqs = new Float64Array(cap);
    this.#seqs.set(seqs);
    this.#used = seqs.length;
    this.#tree = new Int32Array(cap + 1);
    const t = this.#tree;
    // Linear build: each node adds itself to its parent.
    for (let i = 1; i <= seqs.length; i++) t[i] = 1;
    for (let i = 1; i <= cap; i++) {
      const parent = i + (i & -i);
      if (parent <= cap) t[parent]! += t[i]!;
    }
  }
}
