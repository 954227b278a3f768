import type { RedisClient } from "bun";
import type { ReservationBackend } from "./redis-admission.ts";
import type { RedisScripts } from "./redis-scripts.ts";

/** Admission reservations kept in Redis under `prefix`: window counters and sorted sets of held slots. */
export function redisReservations(client: RedisClient, scripts: RedisScripts, prefix: string): ReservationBackend {
  const slotKey = (bucket: string) => `${prefix}rc:${bucket}`;
  return {
    reserve: async (r) => {
      const [tokens, slots, retryAfterSeconds] = (await scripts.run("reserve", [
        r.now,
        r.bucket,
        r.limit.requests,
        r.limit.concurrent ?? "",
        r.windowMs,
        r.tokens,
        ...r.slots,
      ])) as number[];
      return { tokens: tokens!, slots: slots!, retryAfterSeconds: retryAfterSeconds! };
    },
    giveBack: async (bucket, ids) => void (await client.send("ZREM", [slotKey(bucket), ...ids])),
    refresh: async (bucket, ids, now) => void (await client.send("ZADD", [slotKey(bucket), ...ids.flatMap((id) => [String(now), id])])),
    wanted: async (bucket) => (await client.send("EXISTS", [`${slotKey(bucket)}:wanted`])) === 1,
  };
}
