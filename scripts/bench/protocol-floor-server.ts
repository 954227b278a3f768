#!/usr/bin/env bun
/**
 * The protocol floor: the least a server speaking Spool's job API and worker protocol over HTTP
 * can cost on this machine. A bare Bun.serve with the queue in memory: POST /run, GET /job-take
 * and /job-take-batch (held up to 20 s while the queue is empty, as Spool holds them), POST
 * /job-done and GET /health, with no keys, no limits, no checks, no metrics and nothing written
 * to disk (a batch take parked on an empty queue gets the next job alone). The queue benchmark runs it beside Spool (--floor) as a reference row: what Spool's
 * own work costs on top of the HTTP requests themselves. Prints "listening on <url>".
 *
 *   bun scripts/bench/protocol-floor-server.ts
 */
type Job = { id: string; input: unknown };

const queue: Job[] = [];
let head = 0;
const parked: { resolve: (jobs: Job[]) => void }[] = [];
let seq = 0;
let completed = 0;
let inProgress = 0;
const json = (v: unknown) => new Response(JSON.stringify(v), { headers: { "content-type": "application/json" } });

function take(n: number): Job[] {
  const out: Job[] = [];
  while (out.length < n && head < queue.length) out.push(queue[head++]!);
  if (head > 1024 && head * 2 > queue.length) {
    queue.splice(0, head);
    head = 0;
  }
  inProgress += out.length;
  return out;
}

function waitForJob(): Promise<Job[]> {
  return new Promise((resolve) => {
    const taker = { resolve };
    parked.push(taker);
    setTimeout(() => {
      const i = parked.indexOf(taker);
      if (i < 0) return;
      parked.splice(i, 1);
      resolve([]);
    }, 20_000);
  });
}

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  idleTimeout: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const [, , , op] = url.pathname.split("/"); // /v2/<endpoint>/<op>/...
    if (op === "run") {
      const body = (await req.json()) as { input: unknown };
      const job = { id: `floor-${++seq}`, input: body.input };
      const taker = parked.shift();
      if (taker) {
        inProgress++;
        taker.resolve([job]);
      } else queue.push(job);
      return json({ id: job.id, status: "IN_QUEUE" });
    }
    if (op === "job-take" || op === "job-take-batch") {
      const n = op === "job-take" ? 1 : Number(url.searchParams.get("batch_size") ?? 1);
      let jobs = take(n);
      if (!jobs.length) jobs = await waitForJob();
      if (!jobs.length) return new Response(null, { status: 204 });
      return json(op === "job-take" ? jobs[0] : jobs);
    }
    if (op === "job-done") {
      const body = (await req.json()) as { status?: string };
      if (body.status === "IN_PROGRESS") return json({}); // a progress post, not the result
      inProgress--;
      completed++;
      return json({});
    }
    if (op === "health") return json({ jobs: { completed, failed: 0, inProgress, inQueue: queue.length - head, retried: 0 }, workers: { idle: 0, running: 0 } });
    return Response.json({ error: `the protocol floor has no ${req.method} ${url.pathname}` }, { status: 404 });
  },
});
console.log(`listening on ${server.url.href.replace(/\/$/, "")}`);
