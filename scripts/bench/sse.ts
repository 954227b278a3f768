#!/usr/bin/env bun
/**
 * Job streams: server-sent events (GET /stream/<id> with Accept: text/event-stream) against
 * RunPod's polling (GET /stream/<id> back to back, as runpod-sdk does), in the same run on the
 * same `spool serve` process. For 1, 10 and 50 jobs streaming at once, a worker speaking the
 * worker protocol posts a chunk per job every --interval ms; each job has one reader. It prints
 * per mode the delivery latency (worker's POST sent -> reader has the chunk: p50, p95), the
 * server's CPU time per chunk delivered and the HTTP requests per chunk, and SSE's ratios.
 *
 *   bun scripts/bench/sse.ts [--chunks 40] [--interval 20] [--streams 1,10,50]
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { processCpu } from "./harness/process-cpu.ts";
import { stopProcess } from "./harness/processes.ts";
import { bearer } from "./harness/spool-http.ts";
import { startSpool, type SpoolProcess } from "./harness/spool-process.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const cli = benchCli("bench-sse", "usage: bun scripts/bench/sse.ts [--chunks 40] [--interval 20] [--streams 1,10,50]");
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    chunks: { type: "string", default: "40" },
    interval: { type: "string", default: "20" },
    streams: { type: "string", default: "1,10,50" },
    help: { type: "boolean" },
  },
});
if (flags.help) cli.help();
const CHUNKS = cli.int("chunks", flags.chunks!);
const INTERVAL_MS = cli.int("interval", flags.interval!, 0);
const STREAMS = flags.streams!.split(",").map((s) => cli.int("streams", s));

type Mode = "poll" | "sse";
interface Result {
  latencies: number[];
  requests: number;
  cpuMs: number;
  chunks: number;
}

const dir = makeTempDir("spool-bench-sse-");
let server: SpoolProcess | undefined;
const cleanup = exitCleanup(async () => {
  if (server) await stopProcess(server.proc, 5_000);
  removeDir(dir);
});

/** Reads a job's chunks one way until it ends; records when each chunk arrived. */
async function reader(srv: SpoolProcess, id: string, mode: Mode, arrived: Map<number, number>, ready: () => void): Promise<number> {
  const url = `${srv.url}/v2/bench/stream/${id}`;
  if (mode === "poll") {
    let requests = 0;
    for (;;) {
      const pending = fetch(url, { headers: bearer(srv.key) });
      if (requests++ === 0) ready();
      const body = (await (await pending).json()) as { status: string; stream: Array<{ output: { i: number } }> };
      const now = performance.now();
      for (const c of body.stream) arrived.set(c.output.i, now);
      if (body.status === "COMPLETED") return requests;
    }
  }
  const res = await fetch(url, { headers: { ...bearer(srv.key), accept: "text/event-stream" } });
  const text = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await text.read();
    if (done) return 1;
    const now = performance.now();
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.startsWith("event: status")) ready();
      if (!block.startsWith("event: chunk")) continue;
      const data = JSON.parse(block.slice(block.indexOf("data: ") + 6)) as { output: { i: number } };
      arrived.set(data.output.i, now);
    }
  }
}

async function scenario(srv: SpoolProcess, streams: number, mode: Mode): Promise<Result> {
  const worker = `bench-${mode}-${streams}`;
  const ids: string[] = [];
  for (let j = 0; j < streams; j++) {
    const res = await fetch(`${srv.url}/v2/bench/run`, {
      method: "POST",
      headers: bearer(srv.key),
      body: JSON.stringify({ input: { j } }),
    });
    ids.push(((await res.json()) as { id: string }).id);
  }
  const take = await fetch(`${srv.url}/v2/bench/job-take-batch/${worker}?batch_size=${streams}`, { headers: bearer(srv.key) });
  const taken = (await take.json()) as Array<{ id: string }>;
  if (taken.length !== streams) throw new Error(`took ${taken.length} of ${streams} jobs`);

  const sent = ids.map(() => new Map<number, number>());
  const arrived = ids.map(() => new Map<number, number>());
  let waiting = streams;
  const allReading = Promise.withResolvers<void>();
  let counted = false;
  const readers = ids.map((id, j) =>
    reader(srv, id, mode, arrived[j]!, () => {
      if (!counted && --waiting === 0) allReading.resolve();
    }),
  );
  await allReading.promise;
  counted = true;
  await Bun.sleep(100); // let the first requests reach the server before the first chunk

  const cpuBefore = processCpu(srv.proc.pid);
  const post = (path: string, body: unknown) =>
    fetch(`${srv.url}/v2/bench/${path}`, { method: "POST", headers: bearer(srv.key), body: JSON.stringify(body) });
  for (let i = 0; i < CHUNKS; i++) {
    await Promise.all(
      ids.map((id, j) => {
        sent[j]!.set(i, performance.now());
        return post(`job-stream/${worker}/${id}`, { output: { i } });
      }),
    );
    if (INTERVAL_MS) await Bun.sleep(INTERVAL_MS);
  }
  await Promise.all(ids.map((id) => post(`job-done/${worker}/${id}`, { output: "done" })));
  const requests = (await Promise.all(readers)).reduce((a, b) => a + b, 0);
  const cpuMs = (processCpu(srv.proc.pid) - cpuBefore) * 1000;

  const latencies: number[] = [];
  for (let j = 0; j < streams; j++) {
    for (let i = 0; i < CHUNKS; i++) {
      const at = arrived[j]!.get(i);
      if (at === undefined) throw new Error(`${mode}: chunk ${i} of job ${j} never arrived`);
      latencies.push(at - sent[j]!.get(i)!);
    }
  }
  return { latencies, requests, cpuMs, chunks: streams * CHUNKS };
}

const configPath = join(dir, "spool.toml");
const unlimited = `{ requests = 100000000, concurrent = 1000000 }`;
writeFileSync(
  configPath,
  `[endpoints.bench]\nworkersMax = 0\n[endpoints.bench.rateLimits]\nrun = ${unlimited}\nstream = ${unlimited}\nstatus = ${unlimited}\n`,
);

try {
  server = await startSpool({ name: "spool", dataDir: join(dir, "data"), configPath });
  console.log(`bench-sse: ${CHUNKS} chunks per job, one every ${INTERVAL_MS} ms; ${machineLine(machine(), { load: true })}\n`);
  const rows: string[][] = [];
  for (const streams of STREAMS) {
    const results = {} as Record<Mode, Result>;
    for (const mode of ["poll", "sse"] as const) {
      const r = await scenario(server, streams, mode);
      results[mode] = r;
      const s = summarize(r.latencies);
      rows.push([
        String(streams),
        mode === "poll" ? "polling /stream" : "SSE",
        s.p50.toFixed(1),
        s.p95.toFixed(1),
        (r.cpuMs / r.chunks).toFixed(3),
        (r.requests / r.chunks).toFixed(2),
      ]);
    }
    const [p, e] = [results.poll, results.sse];
    const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : "-");
    rows.push([
      String(streams),
      "SSE / polling",
      ratio(summarize(e.latencies).p50, summarize(p.latencies).p50),
      ratio(summarize(e.latencies).p95, summarize(p.latencies).p95),
      ratio(e.cpuMs / e.chunks, p.cpuMs / p.chunks),
      ratio(e.requests / e.chunks, p.requests / p.chunks),
    ]);
  }
  printTable(["jobs streaming", "reader", "latency p50 ms", "latency p95 ms", "server CPU ms/chunk", "requests/chunk"], "llrrrr", rows);
} finally {
  await cleanup.run();
}
