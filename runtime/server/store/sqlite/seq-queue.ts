/** A queued job as the in-memory queue keeps it. */
export interface QueuedEntry {
  id: string;
  seq: number;
  expiresAt: number;
  queuedAt: number;
  lowPriority: boolean;
}

/**
 * The queued jobs of one endpoint in claim order (by seq), with rank: a Fenwick tree over seq
 * offsets from `#base`, so add, delete, rank (the queue position) and k-th are O(log n) at any
 * backlog. Seqs only grow, so the window is rebuilt (O(n), amortised) when it runs out or a seq
 * below it comes back (a job re-queued after a worker loss keeps its place).
 */
export class SeqQueue {
  #base = 0;
  #tree = new Int32Array(1025); // 1-based; capacity = length - 1
  readonly #entries = new Map<number, QueuedEntry>();

  /** Entries with lowPriority (they do not scale workers up). */
  lowPriority = 0;

  get size(): number {
    return this.#entries.size;
  }

  get(seq: number): QueuedEntry | undefined {
    return this.#entries.get(seq);
  }

  add(entry: QueuedEntry): void {
    if (this.#entries.has(entry.seq)) return;
    const cap = this.#tree.length - 1;
    if (entry.seq < this.#base || entry.seq >= this.#base + cap) this.#rebuild(entry.seq);
    this.#entries.set(entry.seq, entry);
    if (entry.lowPriority) this.lowPriority++;
    this.#update(entry.seq - this.#base + 1, 1);
  }

  delete(seq: number): boolean {
    const entry = this.#entries.get(seq);
    if (!entry) return false;
    this.#entries.delete(seq);
    if (entry.lowPriority) this.lowPriority--;
    this.#update(seq - this.#base + 1, -1);
    return true;
  }

  /** How many queued entries come before `seq`. */
  rank(seq: number): number {
    const i = Math.min(seq - this.#base, this.#tree.length - 1);
    return i <= 0 ? 0 : this.#prefix(i);
  }

  /** The entries in claim order, from the front; stop iterating to stop the walk. */
  *inOrder(): Generator<QueuedEntry> {
    for (let k = 1; k <= this.#entries.size; k++) {
      const seq = this.#kth(k);
      if (seq === undefined) return;
      yield this.#entries.get(seq)!;
    }
  }

  /** The seq of the k-th (1-based) entry in claim order. */
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
    return pos + 1 <= n ? this.#base + pos : undefined;
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

  /** A new window that holds every entry and `seq`, with room to grow. */
  #rebuild(seq: number): void {
    let lo = seq;
    let hi = seq;
    for (const s of this.#entries.keys()) {
      if (s < lo) lo = s;
      if (s > hi) hi = s;
    }
    let cap = 1024;
    while (cap < 2 * (hi - lo + 1)) cap *= 2;
    this.#base = lo;
    this.#tree = new Int32Array(cap + 1);
    const t = this.#tree;
    // Linear build: each node adds itself to its parent.
    for (const s of this.#entries.keys()) t[s - lo + 1]! += 1;
    for (let i = 1; i <= cap; i++) {
      const parent = i + (i & -i);
      if (parent <= cap) t[parent]! += t[i]!;
    }
  }
}
