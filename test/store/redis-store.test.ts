import { describe, expect, test } from "bun:test";
import { ReservedAdmission } from "../../runtime/server/store/redis/redis-admission.ts";
import { redisReservations } from "../../runtime/server/store/redis/redis-reservations.ts";
import { RedisScripts } from "../../runtime/server/store/redis/redis-scripts.ts";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { topics } from "../../runtime/server/store/store-events.ts";
import type { NewJob } from "../../runtime/server/store/store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";

const prefix = () => `{t-${crypto.randomUUID().slice(0, 8)}}:`;
const connect = async (p = prefix()) => RedisStore.connect(await redisUrl(), { retention: RETENTION }, p);

// Each test gets its own key prefix on one real redis-server.
runStoreSuite("redis", () => connect());

const T0 = 1_790_000_000_000;
const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const newJob = (id: string, over: Partial<NewJob> = {}): NewJob => ({ id, endpointId: "ep", input: { id }, policy, sync: false, ...over });

describe("redis store, several servers on one prefix", () => {
  test("a batch claim on one server announces every job it took to the others", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    try {
      for (const id of ["j1", "j2", "j3"]) await a.enqueue(newJob(id), T0);
      const heard = new Set<string>();
      const offs = ["j1", "j2", "j3"].map((id) => b.events.on(topics.job(id), () => heard.add(id)));
      await b.get("ep", "j1", T0); // a waiter reads after it starts listening
      expect((await a.claim("ep", "w", 3, T0)).map((j) => j.id)).toEqual(["j1", "j2", "j3"]);
      for (let i = 0; i < 1_000 && heard.size < 3; i++) await Bun.sleep(1);
      expect([...heard].sort()).toEqual(["j1", "j2", "j3"]);
      offs.forEach((off) => off());
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

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
      let admitted = 0;
      const open = new Set([a, b]);
      // Both servers admit in turn until each is refused: whatever one reserved and left, it uses itself.
      for (let i = 0; open.size > 0 && i < 1_000; i++) {
        for (const s of [...open]) {
          if ((await s.admitRequest("ep:run", limit, 10_000, T0 + i)).ok) admitted++;
          else open.delete(s);
        }
      }
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
      const held: { server: RedisStore; release: () => Promise<void> }[] = [];
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
      const both = await Promise.all([s.admitRequest("ep:run", limit, 10_000, T0 + 100), s.admitRequest("ep:run", limit, 10_000, T0 + 100)]);
      expect(both.map((a) => a.ok)).toEqual([true, true]);
    } finally {
      await s.close();
    }
  });

  test("admission: a steady stream of requests asks Redis for window tokens a few times a second, at 100 or 2000 requests/s", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    try {
      for (const [perSecond, seconds, most] of [[100, 4, 25], [2_000, 2, 30]] as const) {
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
      const all = await Promise.all(Array.from({ length: 16 }, () => admission.admit("ep:run", { requests: 1_000_000, concurrent: 200 }, 60_000, T0)));
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

  test("admission: a request of a new window waiting on a reservation refused for the last window is admitted", async () => {
    const s = await connect();
    const limit = { requests: 1 };
    const start = T0 - (T0 % 10_000);
    try {
      expect((await s.admitRequest("ep:run", limit, 10_000, start)).ok).toBe(true);
      // The first window is used up: this one asks Redis and is refused; the next, in a new
      // window, arrives while it waits.
      const [last, next] = await Promise.all([s.admitRequest("ep:run", limit, 10_000, start + 1), s.admitRequest("ep:run", limit, 10_000, start + 10_000)]);
      expect([last.ok, next.ok]).toEqual([false, true]);
    } finally {
      await s.close();
    }
  });

  test("admission: concurrent slots a server went back and forth over stay with it for KEEP_PERIODS trims, then go back", async () => {
    const client = new Bun.RedisClient(await redisUrl());
    const p = prefix();
    const backend = () => redisReservations(client, new RedisScripts(client, [p, RETENTION.syncMs, RETENTION.asyncMs]), p);
    const [a, b] = [new ReservedAdmission(backend(), 10), new ReservedAdmission(backend(), 10)];
    const limit = { requests: 1_000, concurrent: 4 };
    const admit = (s: ReservedAdmission) => s.admit("ep:run", limit, 60_000, T0);
    try {
      const held = await Promise.all([admit(a), admit(a), admit(a), admit(a)]);
      expect(held.every((h) => h.ok)).toBe(true);
      for (const h of held) if (h.ok) await h.release();
      // A trims every 10 ms here: after several trims it still holds all four (used within its last 20 periods).
      await Bun.sleep(60);
      expect((await admit(b)).ok).toBe(false);
      // Once 20 periods passed without them, they go back and b admits.
      let ok = false;
      for (let i = 0; i < 1_000 && !ok; i++) {
        await Bun.sleep(2);
        const r = await admit(b);
        ok = r.ok;
        if (r.ok) await r.release();
      }
      expect(ok).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
      client.close();
    }
  });

  test("a job's changes are announced only while some server listens to it", async () => {
    const p = prefix();
    const [a, b] = [await connect(p), await connect(p)];
    const raw = new Bun.RedisClient(await redisUrl());
    const heard: string[] = [];
    const marker = Promise.withResolvers<void>();
    await raw.subscribe(`${p}events`, (message: string) => {
      heard.push(message);
      if (message === topics.queue("marker")) marker.resolve();
    });
    try {
      for (const id of ["quiet", "watched"]) await a.enqueue(newJob(id), T0);
      const off = b.events.on(topics.job("watched"), () => {});
      await b.get("ep", "watched", T0);
      await a.claim("ep", "w", 2, T0);
      await a.finish("w", "quiet", { output: 1 }, false, T0);
      await a.finish("w", "watched", { output: 1 }, false, T0);
      off();
      await a.enqueue(newJob("m", { endpointId: "marker" }), T0); // one channel keeps its order
      await marker.promise;
      const jobTopics = heard.flatMap((m) => (m.startsWith("[") ? (JSON.parse(m) as string[]) : [m])).filter((t) => t.startsWith("job:"));
      expect(jobTopics).toEqual([topics.job("watched"), topics.job("watched")]);
    } finally {
      raw.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
});
