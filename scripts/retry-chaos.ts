#!/usr/bin/env bun
/**
 * Retrying clients against `spool serve` processes killed with SIGKILL. Each client submits /run
 * jobs, each its own submission; a /run whose answer was lost (the server died under it) is sent
 * again, to the next server, with the same Idempotency-Key (or, with --no-key, without one, as
 * clients without the header retry). No worker takes the jobs, so at the end the endpoint's
 * queued count is the number of jobs made: it must equal the number of submissions.
 *
 *   bun scripts/retry-chaos.ts [--redis URL] [--servers 1|2] [--jobs 300] [--clients 8]
 *       [--kills 3] [--seed 1] [--no-key] [--cli runtime/cli.ts]
 *
 * --redis: the servers share that Redis (a fresh key prefix); otherwise one server on a data dir.
 * --cli: the entry to run (another checkout's, for a before-and-after).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

export interface ChaosOptions {
  cli: string;
  /** Redis URL shared by the servers; none: one server on the embedded store. */
  redis?: string;
  servers: number;
  jobs: number;
  clients: number;
  kills: number;
  seed: number;
  withKey: boolean;
}

export interface ChaosResult {
  submissions: number;
  /** Jobs the endpoint holds at the end. */
  jobs: number;
  kills: number;
  /** Sends that got no answer and were sent again. */
  retries: number;
  /** Submissions answered with more than one job id over their retries. */
  splitAnswers: number;
}

const CONFIG = `[endpoints.echo]
workersMax = 100
rateLimits = { run = { requests = 100000000 }, status = { requests = 100000000 } }
`;

interface Server {
  /** Resolves with the URL once it listens; replaced when it is killed. */
  up: Promise<string>;
  proc?: Bun.Subprocess<"ignore", "pipe", "pipe">;
}

/** A seeded generator of floats in [0, 1) (an LCG: enough to place the kills). */
const seeded = (seed: number) => {
  let x = seed >>> 0 || 1;
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
};

export async function retryChaos(o: ChaosOptions): Promise<ChaosResult> {
  const dir = mkdtempSync(join(tmpdir(), "spool-chaos-"));
  const config = join(dir, "spool.toml");
  await Bun.write(config, CONFIG);
  const store = o.redis ? ["--store", `${o.redis}${o.redis.includes("?") ? "&" : "?"}prefix=chaos-${crypto.randomUUID().slice(0, 8)}`] : [];
  const data = (i: number) => join(dir, `data-${i}`);
  const made = Bun.spawnSync([process.execPath, o.cli, "keys", "create", "--name", "chaos", "--data", data(0), ...store]);
  const key = made.stdout.toString().trim().split("\n").at(-1)!;

  const start = (i: number): Promise<string> => {
    const proc = Bun.spawn([process.execPath, o.cli, "serve", "--port", "0", "--data", data(i), "--config", config, ...store], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    servers[i]!.proc = proc;
    void new Response(proc.stderr).text(); // the log: read so that the pipe never fills
    return (async () => {
      const reader = proc.stdout.getReader();
      let out = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) throw new Error(`spool serve exited before listening: ${out}`);
        out += new TextDecoder().decode(value);
        const m = out.match(/Spool listening on (\S+)/);
        if (m) {
          void (async () => {
            while (!(await reader.read()).done);
          })(); // read on, so the pipe never fills
          return m[1]!;
        }
      }
    })();
  };
  const servers: Server[] = Array.from({ length: o.servers }, () => ({ up: Promise.resolve("") }));
  for (let i = 0; i < o.servers; i++) servers[i]!.up = start(i);
  await Promise.all(servers.map((s) => s.up));

  const rnd = seeded(o.seed);
  const killAt = Array.from({ length: o.kills }, () => Math.floor((0.1 + 0.8 * rnd()) * o.jobs)).sort((a, b) => a - b);
  let answered = 0;
  let retries = 0;
  let splitAnswers = 0;
  let next = 0;
  let onAnswer: () => void = () => {};

  async function submit(i: number): Promise<void> {
    const ids = new Set<string>();
    for (let attempt = 0; ; attempt++) {
      const server = servers[(i + attempt) % o.servers]!;
      const url = await server.up;
      try {
        const res = await fetch(`${url}/v2/echo/run`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            ...(o.withKey ? { "idempotency-key": `chaos-${o.seed}-${i}` } : {}),
          },
          body: JSON.stringify({ input: { i } }),
          signal: AbortSignal.timeout(10_000),
        });
        if (res.status === 200) {
          ids.add(((await res.json()) as { id: string }).id);
          break;
        }
        await res.body?.cancel();
      } catch {
        // No answer: the server died under the request. Sent again below.
      }
      retries++;
    }
    if (ids.size > 1) splitAnswers++;
    answered++;
    onAnswer();
  }

  const clients = Array.from({ length: o.clients }, async () => {
    while (next < o.jobs) await submit(next++);
  });
  let kills = 0;
  for (const at of killAt) {
    if (answered < at) await new Promise<void>((r) => (onAnswer = () => answered >= at && r()));
    const i = kills % o.servers;
    const victim = servers[i]!;
    let restarted!: (url: Promise<string>) => void;
    victim.up = new Promise<string>((r) => (restarted = r)).then((p) => p);
    victim.proc!.kill("SIGKILL");
    await victim.proc!.exited;
    kills++;
    restarted(start(i));
    await victim.up;
  }
  await Promise.all(clients);

  const url = await servers[0]!.up;
  const health = (await (await fetch(`${url}/v2/echo/health`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
    jobs: { inQueue: number };
  };
  for (const s of servers) {
    s.proc!.kill("SIGKILL");
    await s.proc!.exited;
  }
  rmSync(dir, { recursive: true, force: true });
  return { submissions: o.jobs, jobs: health.jobs.inQueue, kills, retries, splitAnswers };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      redis: { type: "string" },
      servers: { type: "string", default: "1" },
      jobs: { type: "string", default: "300" },
      clients: { type: "string", default: "8" },
      kills: { type: "string", default: "3" },
      seed: { type: "string", default: "1" },
      "no-key": { type: "boolean", default: false },
      cli: { type: "string", default: resolve(import.meta.dir, "../runtime/cli.ts") },
    },
  });
  const result = await retryChaos({
    cli: resolve(values.cli!),
    redis: values.redis,
    servers: Number(values.servers),
    jobs: Number(values.jobs),
    clients: Number(values.clients),
    kills: Number(values.kills),
    seed: Number(values.seed),
    withKey: !values["no-key"],
  });
  console.log(JSON.stringify({ ...result, duplicates: result.jobs - result.submissions }));
}
