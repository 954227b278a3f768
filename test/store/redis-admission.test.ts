import { describe, expect, test } from "bun:test";
import { ReservedAdmission, type ReservationBackend } from "../../runtime/server/store/redis/redis-admission.ts";
import { redisReservations } from "../../runtime/server/store/redis/redis-reservations.ts";
import { RedisScripts } from "../../runtime/server/store/redis/redis-scripts.ts";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { until } from "../helpers/until.ts";
import { RETENTION } from "./store-suite.ts";

// Rate limits counted across servers sharing one Redis (each test on its own key prefix).
const prefix = () => `{t-${crypto.randomUUID().slice(0, 8)}}:`;
const connect = async (p = prefix()) => RedisStore.connect(await redisUrl(), { retention: RETENTION }, p);
const T0 = 1_790_000_000_000;
const reservations = (client: Bun.RedisClient, p: string) =>
  redisReservations(client, new RedisScripts(client, [p, RETENTION.syncMs, RETENTION.asyncMs]), p);

/**
 * Real reservations that count what the trims do: the events these tests wait for instead of
 * time passing. `yields` counts give-backs that follow a "wanted" answer (another server was refused).
 */
function watched(client: Bun.RedisClient, p: string) {
  const real = reservations(client, p);
  const seen = { wantedAsked: 0, givenBack: 0, yields: 0, refreshed: 0 };
  let wantedSaidYes = false;
  const backend: ReservationBackend = {
    reserve: (r) => real.reserve(r),
    wanted: async (bucket) => {
      const yes = await real.wanted(bucket);
      seen.wantedAsked++;
      wantedSaidYes = yes;
      return yes;
    },
    giveBack: async (bucket, ids) => {
      const yielding = wantedSaidYes;
      wantedSaidYes = false;
      await real.giveBack(bucket, ids);
      seen.givenBack++;
      if (yielding) seen.yields++;
    },
    refresh: async (bucket, ids, now) => {
      await real.refresh(bucket, ids, now);
      seen.refreshed++;
    },
  };
  return { backend, seen };
}

describe("redis admission, several servers on one prefix", () => {
  test("a released admission slot is free for the other servers once the releasing one flushes (at the latest when it closes)", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    const limit = { requests: 100, concurrent: 1 };
    try {
      const held = await a.admitRequest("ep:run", limit, 10_000, T0);
      expect(held.ok).toBe(true);
      expect((await b.admitRequest("ep:run", limit, 10_000, T0)).ok).toBe(false);
      if (held.ok) await held.release();
      await a.close();
      expect((await b.admitRequest("ep:run", limit, 10_000, T0)).ok).toBe(true);
    } finally {
      await b.close();
    }
  });

  test("admission across servers: a burst on two servers admits exactly the window's limit, never more", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    const limit = { requests: 200 };
    try {
      // 300 requests on each server at once, then as many again once the first answers are in
      // (what one server reserved and left unused, it hands out itself).
      const burst = () =>
        Promise.all([a, b].flatMap((s) => Array.from({ length: 300 }, async () => (await s.admitRequest("ep:run", limit, 10_000, T0)).ok)));
      const admitted = [...(await burst()), ...(await burst())].filter(Boolean).length;
      expect(admitted).toBe(200);
      expect((await a.admitRequest("ep:run", limit, 10_000, T0 + 10_000)).ok).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test("admission across servers: concurrent slots held on two servers never pass the limit; released ones serve again", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    const limit = { requests: 1_000, concurrent: 16 };
    try {
      const held: { server: RedisStore; release: () => void | Promise<void> }[] = [];
      const open = new Set([a, b]);
      for (let i = 0; open.size > 0 && i < 100; i++) {
        for (const s of [...open]) {
          const r = await s.admitRequest("ep:run", limit, 10_000, T0 + i);
          if (r.ok) held.push({ server: s, release: r.release });
          else open.delete(s);
        }
      }
      expect(held.length).toBe(16);
      const onA = held.filter((h) => h.server === a);
      expect(onA.length).toBeGreaterThan(0);
      for (const h of onA) await h.release();
      // The releasing server admits again at once; the others once it gave the slots back.
      expect((await a.admitRequest("ep:run", limit, 10_000, T0 + 200)).ok).toBe(true);
      expect((await b.admitRequest("ep:run", limit, 10_000, T0 + 200)).ok).toBe(false);
      await a.close();
      expect((await b.admitRequest("ep:run", limit, 10_000, T0 + 200)).ok).toBe(true);
    } finally {
      await b.close();
    }
  });

  test("admission: requests arriving together while a server asks Redis for more are all admitted while the limits allow", async () => {
    const s = await connect();
    const limit = { requests: 10, concurrent: 16 };
    try {
      const first = await s.admitRequest("ep:run", limit, 10_000, T0);
      if (first.ok) await first.release();
      // One slot is held free and no token: both ask Redis for a token, and the one resumed second finds the slot gone.
      const both = await Promise.all([
        s.admitRequest("ep:run", limit, 10_000, T0 + 100),
        s.admitRequest("ep:run", limit, 10_000, T0 + 100),
      ]);
      expect(both.map((a) => a.ok)).toEqual([true, true]);
    } finally {
      await s.close();
    }
  });

  test("admission: a steady stream of requests asks Redis for window tokens a few times a second, at 100 or 2000 requests/s", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    try {
      for (const [perSecond, seconds, most] of [
        [100, 4, 25],
        [2_000, 2, 30],
      ] as const) {
        const p = prefix();
        const backend = redisReservations(client, new RedisScripts(client, [p, RETENTION.syncMs, RETENTION.asyncMs]), p);
        let asked = 0;
        const admission = new ReservedAdmission({ ...backend, reserve: (r) => (asked++, backend.reserve(r)) });
        const windowMs = 60_000;
        const start = T0 - (T0 % windowMs);
        const n = perSecond * seconds;
        for (let i = 0; i < n; i++) {
          const a = await admission.admit("ep:run", { requests: 1_000_000 }, windowMs, start + Math.floor((i * 1_000) / perSecond));
          expect(a.ok).toBe(true);
        }
        // Every admission is counted in Redis (reserved tokens include the ones still held).
        expect(Number(await client.send("GET", [`${p}rl:ep:run:${start}`]))).toBeGreaterThanOrEqual(n);
        // The chunk grows to about a quarter of a second of requests, at most 256 (32 at 100/s): a
        // few reservations while it grows, then one per chunk.
        expect({ perSecond, asked: Math.min(asked, most) }).toEqual({ perSecond, asked });
        await admission.close();
      }
    } finally {
      client.close();
    }
  });

  test("admission: requests arriving together on a fresh server share its reservations instead of each asking Redis", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    const backend = redisReservations(client, new RedisScripts(client, [p, RETENTION.syncMs, RETENTION.asyncMs]), p);
    let asked = 0;
    const admission = new ReservedAdmission({ ...backend, reserve: (r) => (asked++, backend.reserve(r)) });
    try {
      const all = await Promise.all(
        Array.from({ length: 16 }, () => admission.admit("ep:run", { requests: 1_000_000, concurrent: 200 }, 60_000, T0)),
      );
      expect(all.every((a) => a.ok)).toBe(true);
      // One reservation in flight at a time, each twice the last: 1 + 2 + 4 + 8 + 16 covers 16.
      expect(asked).toBeLessThanOrEqual(5);
      // Redis holds no more slots for this server than those reservations asked for.
      expect(Number(await client.send("ZCARD", [`${p}rc:ep:run`]))).toBeLessThanOrEqual(31);
    } finally {
      await admission.close();
      client.close();
    }
  });

  test.each([
    ["no concurrent limit", { requests: 1 }],
    ["a concurrent limit with slots to spare", { requests: 1, concurrent: 10 }],
  ])("admission: a request of a new window waiting on a reservation refused for the last window is admitted (%s)", async (_, limit) => {
    const s = await connect();
    const start = T0 - (T0 % 10_000);
    try {
      expect((await s.admitRequest("ep:run", limit, 10_000, start)).ok).toBe(true); // and holds its slot
      // The first window is used up: this one asks Redis and is refused; the next, in a new
      // window, arrives while it waits.
      const [last, next] = await Promise.all([
        s.admitRequest("ep:run", limit, 10_000, start + 1),
        s.admitRequest("ep:run", limit, 10_000, start + 10_000),
      ]);
      expect([last.ok, next.ok]).toEqual([false, true]);
    } finally {
      await s.close();
    }
  });

  test("admission: spare concurrent slots stay with a server while no other server is refused one", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    const { backend, seen } = watched(client, p);
    const a = new ReservedAdmission(backend, 10);
    const limit = { requests: 1_000, concurrent: 4 };
    try {
      const held = await Promise.all([0, 1, 2, 3].map(() => a.admit("ep:run", limit, 60_000, T0)));
      expect(held.every((h) => h.ok)).toBe(true);
      for (const h of held) if (h.ok) await h.release();
      // a asks whether another server wants its unused slots every five trims: once it has, it has
      // trimmed several times, and still holds all four (used within its last 20 periods).
      await until(() => seen.wantedAsked > 0, "a to trim five times");
      expect(seen.givenBack).toBe(0);
      expect(Number(await client.send("ZCARD", [`${p}rc:ep:run`]))).toBe(4);
    } finally {
      await a.close();
      client.close();
    }
  });

  test("admission: a server bursting more often than once a second does not lock another out of the concurrent limit", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    // Trims every 10 ms: a keeps its peak for 20 trims, and bursts again within fewer than that.
    const { backend, seen } = watched(client, p);
    const [a, b] = [new ReservedAdmission(backend, 10), new ReservedAdmission(reservations(client, p), 10)];
    const limit = { requests: 1_000_000, concurrent: 4 };
    let bAdmitted = 0;
    try {
      for (let step = 0; step < 8; step++) {
        const held = await Promise.all([0, 1, 2, 3].map(() => a.admit("ep:run", limit, 60_000, T0)));
        for (const h of held) if (h.ok) await h.release();
        let r = await b.admit("ep:run", limit, 60_000, T0);
        if (!r.ok) {
          // b was refused: a learns so within five trims and gives back what it did not use.
          const yields = seen.yields;
          await until(() => seen.yields > yields, "a to give back its unused slots to the refused server");
          r = await b.admit("ep:run", limit, 60_000, T0);
        }
        if (r.ok) bAdmitted++, await r.release();
      }
      // Before, a kept all four slots throughout and b was refused every time.
      expect(bAdmitted).toBe(8);
      expect(seen.yields).toBeGreaterThan(0); // b was let in by a yielding, not by a limit to spare
      expect(Number(await client.send("ZCARD", [`${p}rc:ep:run`]))).toBeLessThanOrEqual(4);
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.close();
    }
  });

  test("admission: a slot in use for over ten minutes stays counted, so the concurrent limit still holds", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    const { backend, seen } = watched(client, p);
    const [a, b] = [new ReservedAdmission(backend, 10), new ReservedAdmission(reservations(client, p), 10)];
    const limit = { requests: 1_000_000, concurrent: 1 };
    try {
      const stream = await a.admit("ep:run", limit, 60_000, T0); // e.g. a long SSE stream
      expect(stream.ok).toBe(true);
      // The store clock moves a minute per step (other requests bring it); a trims between steps,
      // re-stamping the slot once the minute is up.
      for (let m = 1; m <= 11; m++) {
        expect((await b.admit("ep:run", limit, 60_000, T0 + m * 60_000)).ok).toBe(false);
        const refreshed = seen.refreshed;
        await a.admit("ep:other", { requests: 1_000_000 }, 60_000, T0 + m * 60_000);
        await until(() => seen.refreshed > refreshed, `a to re-stamp its slot in use at minute ${m}`);
      }
      if (stream.ok) await stream.release();
      await a.close();
      expect((await b.admit("ep:run", limit, 60_000, T0 + 11 * 60_000)).ok).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.close();
    }
  });

  test("admission: closing a server gives back its slots still in use; their release afterwards changes nothing", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    const [a, b] = [new ReservedAdmission(reservations(client, p), 10), new ReservedAdmission(reservations(client, p), 10)];
    const limit = { requests: 1_000_000, concurrent: 1 };
    try {
      const running = await a.admit("ep:run", limit, 60_000, T0);
      expect(running.ok).toBe(true);
      await a.close();
      const next = await b.admit("ep:run", limit, 60_000, T0);
      expect(next.ok).toBe(true);
      if (running.ok) await running.release();
      expect((await b.admit("ep:run", limit, 60_000, T0)).ok).toBe(false); // b's one slot is still in use
      expect(Number(await client.send("ZCARD", [`${p}rc:ep:run`]))).toBe(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.close();
    }
  });

  test("admission: a reservation that throws fails the requests waiting on it, and the next one asks again", async () => {
    let fail = true;
    const backend: ReservationBackend = {
      reserve: (r) => {
        if (fail) throw new Error("redis went away");
        return Promise.resolve({ tokens: r.tokens, slots: r.slots.length, retryAfterSeconds: 1 });
      },
      giveBack: async () => {},
      refresh: async () => {},
      wanted: async () => false,
    };
    const a = new ReservedAdmission(backend);
    await expect(a.admit("ep:run", { requests: 100 }, 10_000, T0)).rejects.toThrow("redis went away");
    fail = false;
    expect((await a.admit("ep:run", { requests: 100 }, 10_000, T0 + 1)).ok).toBe(true);
    await a.close();
  });
});
