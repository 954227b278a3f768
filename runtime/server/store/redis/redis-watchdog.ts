import type { RedisClient } from "bun";
import { StoreUnavailableError } from "../store.ts";

/** How long commands may wait on Redis with no reply coming back before the connection is dropped. */
export const REPLY_TIMEOUT_MS = 10_000;

export interface ReplyWatch {
  /** Stops watching and connecting again: the store is closing. */
  stop(): void;
}

/**
 * Bounds how long a store call waits on Redis. Bun's client waits for a reply for ever, so a
 * redis-server that stops answering (paused, swapping, or behind a network that drops packets)
 * would hold every request that touches the store. This counts the commands sent on `client`
 * that have no reply yet; when some have waited `timeoutMs` with no reply arriving meanwhile
 * (Redis answers in order, so any reply is progress), it closes the connection, which fails them
 * as StoreUnavailableError (the routes answer 503), and connects again. Checked every tenth of
 * the timeout: a call fails after 1.0 to 1.1 times it.
 */
export function watchReplies(client: RedisClient, opts: { timeoutMs?: number } = {}): ReplyWatch {
  const timeoutMs = opts.timeoutMs ?? REPLY_TIMEOUT_MS;
  const send = client.send.bind(client);
  let waiting = 0;
  /** When the oldest unanswered command went out, or the last reply came, whichever is later. */
  let progressAt = 0;
  let trips = 0;
  const settled = () => {
    waiting--;
    progressAt = performance.now();
  };
  // After close(), or once its own reconnection gave up (onclose), Bun does not reconnect by
  // itself: every later call would fail at once until a restart. So a call on such a client
  // connects first (one attempt at a time, bounded by the client's connection timeout).
  let closed = false;
  let stopped = false;
  /** The attempt under way; it answers why it failed (undefined once connected). */
  let reconnecting: Promise<StoreUnavailableError | undefined> | undefined;
  // Bounded: a connect to a Redis that is down can otherwise wait on Bun's own retries for ever.
  const reconnect = () =>
    (reconnecting ??= Promise.race([client.connect(), Bun.sleep(timeoutMs).then(() => Promise.reject(new Error("timeout")))]).then(
      () => {
        reconnecting = undefined;
        closed = false;
        if (stopped) client.close(); // the store closed while this connected
        return undefined;
      },
      (err) => {
        reconnecting = undefined;
        return (
          notReady(err) ??
          new StoreUnavailableError(`Redis refuses connections (down or restarting: ${String((err as Error)?.message ?? err)})`)
        );
      },
    ));
  client.onclose = () => void (closed = true);
  const unavailable = () => new StoreUnavailableError(`Redis did not answer within ${timeoutMs} ms`);
  client.send = (async (command: string, args: string[]) => {
    if (closed && !client.connected) {
      if (stopped) throw new StoreUnavailableError("the Redis store is closed");
      const failed = await reconnect();
      if (!client.connected) throw failed ?? new StoreUnavailableError("Redis refuses connections (down or restarting)");
    }
    const trip = trips;
    const pending = send(command, args); // a call refused at once (bad arguments) is never counted
    if (waiting++ === 0) progressAt = performance.now();
    return pending.then(
      (reply) => (settled(), reply),
      (err) => {
        settled();
        if (trips !== trip) throw unavailable();
        throw notReady(err) ?? (client.connected ? err : new StoreUnavailableError("the connection to Redis was closed or reset"));
      },
    );
  }) as RedisClient["send"];

  const timer = setInterval(
    () => {
      if (waiting === 0 || performance.now() - progressAt < timeoutMs) return;
      trips++;
      closed = true;
      client.close(); // fails every command still waiting
      progressAt = performance.now();
      void reconnect(); // commands sent meanwhile wait for it (or fail with it)
    },
    Math.max(1, Math.floor(timeoutMs / 10)),
  );
  timer.unref();
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/**
 * Redis's own answers that mean "not now" rather than "wrong": the store is 503 while they last.
 * LOADING: a restarted Redis reads its data back; READONLY: after a failover this connection
 * reaches a replica; MASTERDOWN: a replica lost its primary; connection errors: down or restarting.
 */
export function notReady(err: unknown): StoreUnavailableError | undefined {
  const message = String((err as Error | undefined)?.message ?? err);
  const code = (err as { code?: string } | undefined)?.code ?? "";
  if (message.startsWith("LOADING")) return new StoreUnavailableError("Redis is loading its data after a restart");
  if (message.startsWith("READONLY")) return new StoreUnavailableError("Redis is a read-only replica (after a failover?)");
  if (message.startsWith("MASTERDOWN")) return new StoreUnavailableError("Redis is a replica that lost its primary");
  if (/ECONNREFUSED|Connection refused/i.test(`${code} ${message}`))
    return new StoreUnavailableError("Redis refuses connections (down or restarting)");
  if (/CONNECTION_CLOSED|ECONNRESET|SOCKET_CLOSED|Connection (closed|reset)/i.test(`${code} ${message}`)) {
    return new StoreUnavailableError("the connection to Redis was closed or reset");
  }
  return undefined;
}
