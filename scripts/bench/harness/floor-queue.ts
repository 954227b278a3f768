/** The protocol floor's queues (see protocol-floor-server.ts): in memory and in Redis. */
import { RedisClient } from "bun";

/** A job as the floor keeps it. */
export type FloorJob = { id: string; input: unknown };

/** Where the floor keeps its queue: each step is one write, answered when it is done. */
export interface FloorQueue {
  push(job: FloorJob): Promise<void> | void;
  /** A job handed straight to a waiting take: written as taken, never queued. */
  hand(job: FloorJob): Promise<void> | void;
  /** Up to n jobs, as JSON texts. */
  take(n: number): Promise<string[]> | string[];
  done(id: string, result: string): Promise<void> | void;
  depth(): Promise<number> | number;
  /** Shared queues only: waits up to `seconds` for a job pushed through any server, then takes up to n. */
  wait?(n: number, seconds: number): Promise<string[]>;
}

export function memoryQueue(): FloorQueue {
  const queue: string[] = [];
  let head = 0;
  return {
    push: (job) => void queue.push(JSON.stringify(job)),
    hand: () => {},
    take(n) {
      const out = queue.slice(head, head + n);
      head += out.length;
      if (head > 1024 && head * 2 > queue.length) {
        queue.splice(0, head);
        head = 0;
      }
      return out;
    },
    done: () => {},
    depth: () => queue.length - head,
  };
}

export function redisQueue(url: string): FloorQueue {
  const u = new URL(url);
  const prefix = u.searchParams.get("prefix") ?? "floor";
  const shared = u.searchParams.get("shared") === "1";
  u.search = "";
  const client = new RedisClient(u.href);
  const q = `{${prefix}}:q`;
  /** Connections for blocked takes (a BRPOP holds its connection until it is answered). */
  const idle: RedisClient[] = [];
  const wait = async (n: number, seconds: number): Promise<string[]> => {
    const c = idle.pop() ?? new RedisClient(u.href);
    try {
      const got = (await c.send("BRPOP", [q, String(seconds)])) as [string, string] | null;
      if (!got) return [];
      if (n === 1) return [got[1]];
      // The popped job is answered even if the rest of the batch cannot be taken.
      const rest = (await c.send("RPOP", [q, String(n - 1)]).catch(() => null)) as string[] | null;
      return [got[1], ...(rest ?? [])];
    } finally {
      idle.push(c);
    }
  };
  return {
    ...(shared ? { wait } : {}),
    push: async (job) => void (await client.send("LPUSH", [q, JSON.stringify(job)])),
    hand: async (job) => void (await client.send("SET", [`{${prefix}}:run:${job.id}`, JSON.stringify(job)])),
    take: async (n) => ((await client.send("RPOP", [q, String(n)])) as string[] | null) ?? [],
    done: async (id, result) => void (await client.send("SET", [`{${prefix}}:res:${id}`, result])),
    depth: async () => Number(await client.send("LLEN", [q])),
  };
}
