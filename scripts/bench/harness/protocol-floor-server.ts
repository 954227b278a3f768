#!/usr/bin/env bun
/**
 * The protocol floor: the least a server speaking Spool's job API and worker protocol over HTTP
 * can cost on this machine. A bare Bun.serve: POST /run, GET /job-take and /job-take-batch (held
 * up to 20 s while the queue is empty, as Spool holds them), POST /job-done and GET /health, with
 * no keys, no limits, no checks, no metrics and no index. The queue benchmark runs it beside
 * Spool (--floor) as a reference row: what Spool's own work costs on top of the HTTP requests
 * themselves. Prints "listening on <url>".
 *
 * Its queue is in memory; with `--store sqlite --data DIR`, in a SQLite file in DIR with group
 * commit, each write answered after its COMMIT (the durable floor: floor-sqlite-queue.ts); or with `--store <redis url>[?prefix=P]` in Redis, one command a step
 * and no script: a submission is an LPUSH (or, to a take waiting on this server, a SET of the job
 * as taken), a take an RPOP of up to the batch size, a result a SET. That is the least a server
 * on Redis writes for each of the protocol's three requests. The counts in /health are the
 * server's own, but for the queue's depth.
 *
 * With `&shared=1` in the store URL several floor servers share one queue: nothing is handed
 * over in memory (a submission is always an LPUSH), and a take that finds the queue empty waits
 * in a BRPOP of its own connection, so a job pushed through any server reaches it (then an RPOP
 * of the rest of its batch).
 *
 *   bun scripts/bench/harness/protocol-floor-server.ts [--store redis://host:port?prefix=P[&shared=1] | --store sqlite --data DIR]
 */
import { memoryQueue, redisQueue, type FloorQueue } from "./floor-queue.ts";
import { sqliteQueue } from "./floor-sqlite-queue.ts";

const arg = (name: string) => {
  const at = Bun.argv.indexOf(name);
  return at > 0 ? Bun.argv[at + 1] : undefined;
};
const storeArg = arg("--store");
const dataArg = arg("--data");
if (storeArg === "sqlite" && dataArg === undefined) {
  console.error("protocol-floor-server: --store sqlite needs --data DIR (where its floor.db goes)");
  process.exit(2);
}
const store: FloorQueue = storeArg === undefined ? memoryQueue() : storeArg === "sqlite" ? sqliteQueue(dataArg!) : redisQueue(storeArg);

/** Takes waiting for a job, longest waiting first (none with a shared queue: those wait in Redis). */
const parked: { resolve: (jobs: string[] | null) => void }[] = [];
/** Submissions written so far: a take that found none looks again if one was written meanwhile. */
let pushed = 0;
let seq = 0;
/** Tells this server's job ids from another's on a shared queue. */
const tag = Math.random().toString(36).slice(2, 8);
let completed = 0;
let inProgress = 0;
const json = (text: string) => new Response(text, { headers: { "content-type": "application/json" } });

/**
 * Up to n jobs, waiting up to 20 s for one (a batch take parked on an empty queue gets the next
 * job alone; with a shared queue, the next job and an RPOP of the rest).
 */
async function take(n: number): Promise<string[]> {
  for (;;) {
    const before = pushed;
    const jobs = await store.take(n);
    if (jobs.length) {
      inProgress += jobs.length;
      return jobs;
    }
    if (pushed !== before) continue;
    if (store.wait) {
      const waited = await store.wait(n, 20);
      inProgress += waited.length;
      return waited;
    }
    const handed = await new Promise<string[] | null>((resolve) => {
      const taker = { resolve };
      parked.push(taker);
      setTimeout(() => {
        const i = parked.indexOf(taker);
        if (i < 0) return;
        parked.splice(i, 1);
        resolve([]);
      }, 20_000);
    });
    if (handed) return handed; // [] when the wait ran out; null: look at the queue again
  }
}

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  idleTimeout: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const [, , , op, , jobId] = url.pathname.split("/"); // /v2/<endpoint>/<op>/<worker>/<job>
    if (op === "run") {
      const body = (await req.json()) as { input: unknown };
      const job = { id: `floor-${tag}-${++seq}`, input: body.input };
      const taker = parked.shift();
      if (taker) {
        await store.hand(job);
        inProgress++;
        taker.resolve([JSON.stringify(job)]);
      } else {
        await store.push(job);
        pushed++;
        parked.shift()?.resolve(null); // a take that parked while this was written looks again
      }
      return json(JSON.stringify({ id: job.id, status: "IN_QUEUE" }));
    }
    if (op === "job-take" || op === "job-take-batch") {
      const n = op === "job-take" ? 1 : Number(url.searchParams.get("batch_size") ?? 1);
      const jobs = await take(n);
      if (!jobs.length) return new Response(null, { status: 204 });
      return json(op === "job-take" ? jobs[0]! : `[${jobs.join(",")}]`);
    }
    if (op === "job-done") {
      const body = await req.text();
      if ((JSON.parse(body) as { status?: string }).status === "IN_PROGRESS") return json("{}"); // a progress post, not the result
      await store.done(jobId ?? "", body);
      inProgress--;
      completed++;
      return json("{}");
    }
    if (op === "health") {
      const jobs = { completed, failed: 0, inProgress, inQueue: await store.depth(), retried: 0 };
      return json(JSON.stringify({ jobs, workers: { idle: 0, running: 0 } }));
    }
    return Response.json({ error: `the protocol floor has no ${req.method} ${url.pathname}` }, { status: 404 });
  },
});
console.log(`listening on ${server.url.href.replace(/\/$/, "")}`);
