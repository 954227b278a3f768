import { expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { LocalEvents, type StoreEvents } from "../../runtime/server/store/store-events.ts";
import { waitFor } from "../../runtime/server/jobs/wait-for.ts";

/** Events whose announcements never come (lost), as across a Redis reconnection. */
const lossy = (recheckMs?: number): StoreEvents => {
  const local = new LocalEvents();
  return { on: (t, l) => local.on(t, l), emit: () => {}, recheckMs };
};

const parked = async (clock: ManualClock) => {
  for (let i = 0; i < 100 && clock.sleeping === 0; i++) await Promise.resolve();
  expect(clock.sleeping).toBe(1);
};

test("a wait whose announcement was lost looks again after the events' recheck period, not only at its end", async () => {
  const clock = new ManualClock();
  let value: string | null = null;
  const waiting = waitFor({ events: lossy(3_000), clock }, "job:a", 60_000, async () => value);
  await parked(clock);
  value = "done"; // changed in the store; its announcement never arrives
  clock.advance(3_000);
  expect(await waiting).toBe("done");
});

test("without a recheck period (announcements never lost) a wait sleeps until its end or a wake-up", async () => {
  const clock = new ManualClock();
  let value: string | null = null;
  const waiting = waitFor({ events: lossy(), clock }, "job:a", 60_000, async () => value);
  await parked(clock);
  value = "done";
  const parkedAt = clock.now();
  clock.advance(3_000);
  // Still the one sleep to the wait's end: a recheck at 3 s would have been woken by this advance.
  expect(clock.dueTimes).toEqual([parkedAt + 60_000]);
  clock.advance(57_000);
  expect(await waiting).toBe("done");
});
