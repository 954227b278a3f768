import { expect, test } from "bun:test";
import { SeqQueue } from "../../runtime/server/store/sqlite/seq-queue.ts";

test("the queue's order and ranks match a sorted list through random adds and deletes, window rebuilds included", () => {
  const q = new SeqQueue();
  const model: number[] = [];
  let next = 1;
  let seed = 42;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let step = 0; step < 20_000; step++) {
    const r = rand();
    if (r < 0.5 || model.length === 0) {
      // Mostly new seqs at the back; sometimes an old one comes back (a lost worker's job).
      const seq = r < 0.05 && next > 10 ? Math.max(1, next - 1 - Math.floor(rand() * 5_000)) : next++;
      if (model.includes(seq)) continue;
      q.add({ id: `j${seq}`, seq, expiresAt: 0, queuedAt: 0, lowPriority: seq % 3 === 0, rid: seq, fresh: true });
      model.push(seq);
      model.sort((a, b) => a - b);
    } else {
      // Mostly from the front (takes), sometimes anywhere (cancels).
      const i = rand() < 0.7 ? 0 : Math.floor(rand() * model.length);
      expect(q.delete(model[i]!)).toBe(true);
      model.splice(i, 1);
    }
    if (step % 997 === 0 && model.length) {
      const probe = model[Math.floor(rand() * model.length)]!;
      expect(q.rank(probe)).toBe(model.indexOf(probe));
      expect([...q.inOrder()].map((e) => e.seq)).toEqual(model);
      expect(q.lowPriority).toBe(model.filter((s) => s % 3 === 0).length);
    }
  }
  expect(q.size).toBe(model.length);
  expect(q.delete(-5)).toBe(false);
});

test("memory follows the number of queued jobs, not the range of their seqs: one old job among millions of newer seqs", () => {
  const q = new SeqQueue();
  const entry = (seq: number) => ({ id: `j${seq}`, seq, expiresAt: 0, queuedAt: 0, lowPriority: false, rid: seq, fresh: true });
  q.add(entry(1)); // e.g. a job of a quiet endpoint, or a lowPriority one passed over for hours
  // Jobs pass through, each taken soon after it came, their seqs climbing into the millions.
  for (let seq = 1_000; seq < 5_000_000; seq += 997) {
    q.add(entry(seq));
    q.delete(seq);
  }
  q.add(entry(5_000_000));
  q.add(entry(5_000_001));
  expect(q.capacity).toBeLessThanOrEqual(1024);
  expect([...q.inOrder()].map((e) => e.seq)).toEqual([1, 5_000_000, 5_000_001]);
  expect(q.rank(5_000_001)).toBe(2);
  // A job re-queued after a worker loss keeps its place, before newer ones.
  q.delete(5_000_000);
  q.add(entry(5_000_000));
  q.add(entry(4_999_999));
  expect([...q.inOrder()].map((e) => e.seq)).toEqual([1, 4_999_999, 5_000_000, 5_000_001]);
  expect(q.rank(5_000_000)).toBe(2);
});
