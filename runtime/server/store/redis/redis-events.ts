import type { RedisClient } from "bun";
import { LocalEvents, type StoreEvents } from "../store-events.ts";

/** See RedisEvents.recheckMs. */
export const RECHECK_MS = 3_000;
/** How often a subscriber Bun gave up on tries to connect again. */
const SUBSCRIBER_RETRY_MS = 1_000;

/**
 * Subscribes `subscriber` to the events channel and keeps it subscribed until `closing()`. Bun
 * reconnects a dropped subscriber but does not subscribe it again (seen with a restarted
 * redis-server: PUBLISH then reaches no one), so each reconnection subscribes again (unsubscribing
 * first keeps one handler) and wakes every wait to look again. After about 30 s without Redis
 * Bun stops reconnecting (onclose): it is then tried again every second.
 */
export async function keepSubscribed(subscriber: RedisClient, channel: string, events: RedisEvents, closing: () => boolean): Promise<void> {
  const onMessage = (message: string) => events.receive(message);
  await subscriber.subscribe(channel, onMessage);
  subscriber.onconnect = () =>
    void subscriber
      .unsubscribe(channel)
      .then(() => subscriber.subscribe(channel, onMessage))
      .then(
        () => events.resubscribed(),
        () => {},
      );
  const retry = () => {
    if (closing() || subscriber.connected) return;
    subscriber.connect().catch(() => setTimeout(retry, SUBSCRIBER_RETRY_MS).unref());
  };
  subscriber.onclose = () => void (closing() || setTimeout(retry, SUBSCRIBER_RETRY_MS).unref());
}

/**
 * Pub/sub carries the topics the scripts announce, so long-polls on any server wake. A job's
 * topic is announced only while some server listens to it (registered in the hash \`listen\`), so
 * jobs nobody waits on cost no message to every server.
 */
export class RedisEvents implements StoreEvents {
  readonly local = new LocalEvents();
  /** Messages published while this server's subscription was down are lost: waits look again this often. */
  readonly recheckMs = RECHECK_MS;
  /** Job topics with listeners here, and how many. */
  readonly #listened = new Map<string, number>();
  /** Job topics whose last listener here left this tick: unregistered after it unless one comes back. */
  readonly #leaving = new Set<string>();
  #leaveTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly channel: string,
    private readonly listenKey: string,
  ) {}

  on(topic: string, listener: () => void): () => void {
    const off = this.local.on(topic, listener);
    if (!topic.startsWith("job:")) return off;
    const n = this.#listened.get(topic) ?? 0;
    this.#listened.set(topic, n + 1);
    // Sent before whatever the listener's caller reads next on the same connection, so a change
    // that read missed is announced.
    if (n === 0 && !this.#leaving.delete(topic)) void this.client.send("HINCRBY", [this.listenKey, topic, "1"]).catch(() => {});
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      off();
      const left = this.#listened.get(topic)! - 1;
      if (left > 0) return void this.#listened.set(topic, left);
      this.#listened.delete(topic);
      this.#leaving.add(topic);
      this.#leaveTimer ??= setTimeout(() => this.#unregister(), 0);
    };
  }

  #unregister(): void {
    this.#leaveTimer = undefined;
    for (const topic of this.#leaving) void this.client.send("HINCRBY", [this.listenKey, topic, "-1"]).catch(() => {});
    this.#leaving.clear();
  }

  emit(topic: string): void {
    void this.client.send("PUBLISH", [this.channel, topic]);
  }

  /** The subscription is back after a reconnection: what was announced meanwhile is lost, so every wait looks again. */
  resubscribed(): void {
    this.local.emitAll();
  }

  /** A message is one topic, or a JSON array of the topics one script announced. */
  receive(message: string): void {
    if (!message.startsWith("[")) return this.local.emit(message);
    for (const topic of JSON.parse(message) as string[]) this.local.emit(topic);
  }
}
