import { expect, test } from "bun:test";
import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { watchReplies } from "../../runtime/server/store/redis/redis-watchdog.ts";
import { keepSubscribed, RedisEvents } from "../../runtime/server/store/redis/redis-events.ts";
import { topics } from "../../runtime/server/store/store-events.ts";
import { startOwnRedis } from "../helpers/redis-server.ts";
import { until } from "../helpers/until.ts";
import { RETENTION } from "./store-suite.ts";

const policy = { executionTimeout: 60_000, lowPriority: false, ttl: 86_400_000 };
const connect = (url: string) => RedisStore.connect(url, { retention: RETENTION }, "{restart}:", 1_000);

test("after redis-server restarts, each server subscribes again: other servers' announcements wake its waits, and waits parked across the restart look again", async () => {
  await using redis = await startOwnRedis({ aof: true });
  const [a, b] = [await connect(redis.url), await connect(redis.url)];
  let n = 0;
  const submit = () => b.enqueue({ id: `j${++n}`, endpointId: "ep", input: {}, policy, sync: false }, Date.now());
  let woken = 0;
  const off = a.events.on(topics.queue("ep"), () => woken++);
  let parkedWoken = false;
  const offParked = a.events.on(topics.queue("other"), () => (parkedWoken = true)); // nothing announces it
  try {
    await submit();
    await until(() => woken > 0, "a to hear b's announcement");
    expect(woken).toBe(1);

    await redis.restart();
    // Waits parked across the restart look again once a has subscribed again.
    await until(() => parkedWoken, "a's parked wait to look again after the restart");
    // Bun connects b again by itself; a submission then must wake a's wait.
    woken = 0;
    await until(async () => {
      await submit().catch(() => {}); // refused while b connects again
      return woken > 0;
    }, "a submission on b after the restart to wake a's wait");
  } finally {
    off();
    offParked();
    await Promise.all([a.close(), b.close()]);
  }
});

test("a connection Bun stopped reconnecting (its retries gave up) is connected again by the calls that follow", async () => {
  await using redis = await startOwnRedis();
  // autoReconnect off: Bun gives up at once, as it does after maxRetries failed attempts.
  const client = new Bun.RedisClient(redis.url, { autoReconnect: false, connectionTimeout: 1_000 });
  await client.connect();
  const watch = watchReplies(client, { timeoutMs: 1_000 });
  try {
    expect(await client.send("PING", [])).toBe("PONG");
    await redis.restart();
    // The first call may fail (it finds the connection closed); one of the next ones connects again.
    await until(async () => (await client.send("PING", []).catch((err: unknown) => err)) === "PONG", "a call to connect the client again");
  } finally {
    watch.stop();
    client.close();
  }
});

test("a subscriber Bun stopped reconnecting is connected and subscribed again, and its waits look again", async () => {
  await using redis = await startOwnRedis();
  const publisher = new Bun.RedisClient(redis.url);
  // autoReconnect off: Bun gives up at once, as it does after about 30 s without Redis.
  const subscriber = new Bun.RedisClient(redis.url, { autoReconnect: false });
  await subscriber.connect();
  const events = new RedisEvents(publisher, "{sub}:events", "{sub}:listen");
  let closed = false;
  await keepSubscribed(subscriber, "{sub}:events", events, () => closed);
  let heard = 0;
  let parkedWoken = false;
  const off = [events.on(topics.queue("ep"), () => heard++), events.on(topics.queue("other"), () => (parkedWoken = true))];
  try {
    await redis.restart();
    await until(() => parkedWoken, "the subscriber's parked waits to look again");
    // That wake-up reached every wait, this one too: only a publication heard from here shows the subscription.
    heard = 0;
    // The publisher reconnects by itself; PUBLISH counts the subscribers it reached.
    await until(
      () =>
        publisher.send("PUBLISH", ["{sub}:events", topics.queue("ep")]).then(
          (reached) => Number(reached) > 0,
          () => false,
        ),
      "a publication to reach the subscriber",
    );
    await until(() => heard > 0, "the subscriber, subscribed again, to hear the publication");
  } finally {
    closed = true;
    off.forEach((f) => f());
    subscriber.close();
    publisher.close();
  }
});
