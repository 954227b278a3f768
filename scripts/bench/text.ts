#!/usr/bin/env bun
/**
 * Text endpoint benchmark: generated tokens per second for 1 and 4 concurrent requests through
 * the endpoint (a `spool serve` process whose scaler runs one text worker process), against
 * node-llama-cpp called directly in this process on the same model with the same context
 * settings (sequences, threads), and the ratio of the two (the queue's overhead).
 *
 *   bun scripts/bench/text.ts [--model FILE.gguf] [--device cpu|cuda|vulkan] [--tokens 256]
 *       [--rounds 4] [--sequences 4] [--threads 0]
 *
 * Without --model it generates the tiny demo GGUF (tokens are cheap there, so the ratio shows
 * the most overhead the queue can add). Through the endpoint it measures POST /runsync
 * (worker-vllm input, not streamed) and POST /openai/v1/chat/completions with stream: true
 * (SSE, read to [DONE]). It prints figures and asserts only that every request succeeded.
 *
 * Then streaming latency as LLM servers measure it: time to first token and the gaps between
 * streamed texts (p50, p99), through the OpenAI route and through node-llama-cpp directly, with
 * the demo model paced to stand for a real one (--speeds, tokens/s) and --streams at once, and
 * the worker's stream posts per token. --flush-ms sets the endpoints' streamFlushMs.
 *
 *   bun scripts/bench/text.ts --speeds 20,50,200 --streams 1,8 --stream-tokens 64 [--flush-ms 50]
 */
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, getLlamaGpuTypes, LlamaCompletion, LlamaLogLevel } from "node-llama-cpp";
import { writeTinyGguf } from "../../handlers/text/tiny-gguf.ts";
import { benchCli } from "./harness/cli.ts";
import { directLatency, spoolLatency, type LatencyRow } from "./harness/text-latency.ts";
import { exitCleanup } from "./harness/exit-cleanup.ts";
import { machine } from "./harness/machine.ts";
import { stopProcess } from "./harness/processes.ts";
import { bearer, waitForIdleWorker } from "./harness/spool-http.ts";
import { REPO_ROOT, startSpool, type SpoolProcess } from "./harness/spool-process.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const cli = benchCli(
  "bench-text",
  "usage: bun scripts/bench/text.ts [--model FILE.gguf] [--device cpu|cuda|vulkan] [--tokens 256] [--rounds 4] [--sequences 4] [--threads 0]\n" +
    "                                 [--speeds 20,50,200] [--streams 1,8] [--stream-tokens 64] [--flush-ms MS] [--latency-only]",
);
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    model: { type: "string" },
    device: { type: "string", default: "cpu" },
    tokens: { type: "string", default: "256" },
    rounds: { type: "string", default: "4" },
    sequences: { type: "string", default: "4" },
    threads: { type: "string", default: "0" },
    speeds: { type: "string", default: "20,50,200" },
    streams: { type: "string", default: "1,8" },
    "stream-tokens": { type: "string", default: "64" },
    "flush-ms": { type: "string" },
    "latency-only": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) cli.help();
const device = flags.device as "cpu" | "cuda" | "vulkan";
if (!["cpu", "cuda", "vulkan"].includes(device)) cli.fail(`--device must be cpu, cuda or vulkan, got ${device}`);
const tokens = cli.int("tokens", flags.tokens);
const rounds = cli.int("rounds", flags.rounds);
const sequences = cli.int("sequences", flags.sequences);
const threadsFlag = cli.int("threads", flags.threads, 0);
const list = (name: string, v: string) => v.split(",").map((x) => cli.int(name, x));
const speeds = list("speeds", flags.speeds!);
const streams = list("streams", flags.streams!);
const streamTokens = cli.int("stream-tokens", flags["stream-tokens"]!);
const flushMs = flags["flush-ms"] === undefined ? undefined : cli.int("flush-ms", flags["flush-ms"], 0);

const dir = makeTempDir("spool-bench-text-");
let server: SpoolProcess | undefined;
const cleanup = exitCleanup(async () => {
  if (server) await stopProcess(server.proc, 10_000);
  removeDir(dir);
});
const model = flags.model ? resolve(flags.model) : writeTinyGguf(join(dir, "tiny.gguf"));
const PROMPT = "Write a short story about a lighthouse keeper.";
const contextSize = 2048;

interface Row {
  path: string;
  concurrency: number;
  requests: number;
  tokens: number;
  seconds: number;
}
const rows: Row[] = [];

/** Runs `rounds` rounds of `concurrency` requests at once; each returns its generated tokens. */
async function measure(path: string, concurrency: number, one: (i: number) => Promise<number>): Promise<Row> {
  await one(0); // warm-up
  let total = 0;
  const started = performance.now();
  for (let r = 0; r < rounds; r++) {
    const counts = await Promise.all(Array.from({ length: concurrency }, (_, i) => one(r * concurrency + i + 1)));
    total += counts.reduce((a, b) => a + b, 0);
  }
  const row = { path, concurrency, requests: rounds * concurrency, tokens: total, seconds: (performance.now() - started) / 1000 };
  rows.push(row);
  return row;
}

// --- node-llama-cpp directly, the same settings as the handler ------------------------------
async function direct(): Promise<void> {
  const llama = await getLlama({
    gpu: device === "cpu" ? false : device,
    build: "never",
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  });
  const m = await llama.loadModel({ modelPath: model, gpuLayers: device === "cpu" ? 0 : "max" });
  const ctx = await m.createContext({ sequences, contextSize, threads: threadsFlag || Math.max(1, llama.cpuMathCores - 1) });
  const one = async (seed: number) => {
    const seq = ctx.getSequence();
    const completion = new LlamaCompletion({ contextSequence: seq });
    let n = 0;
    await completion.generateCompletion(PROMPT, { maxTokens: tokens, temperature: 1, seed, onToken: (t) => void (n += t.length) });
    completion.dispose();
    seq.dispose();
    return n;
  };
  for (const c of [1, 4]) await measure("node-llama-cpp direct", c, one);
  await ctx.dispose();
  await m.dispose();
  await llama.dispose();
}

// --- through the endpoint: a real server process, its scaler runs the worker -----------------
async function throughEndpoint(): Promise<void> {
  const configPath = join(dir, "spool.toml");
  writeFileSync(
    configPath,
    `[server]\nhost = "127.0.0.1"\n\n` +
      `[endpoints.text]\nhandler = ${JSON.stringify(join(REPO_ROOT, "handlers/text/handler.ts"))}\nworkersMin = 1\nworkersMax = 1\nidleTimeout = 3600\n` +
      `[endpoints.text.options]\nmodel = ${JSON.stringify(model)}\nmodelName = "bench"\ndevice = "${device}"\nsequences = ${sequences}\ncontextSize = ${contextSize}\nthreads = ${threadsFlag}\n`,
  );
  server = await startSpool({ name: "spool serve", dataDir: join(dir, "data"), configPath, cwd: dir, readyTimeoutMs: 30_000 });
  try {
    await waitForIdleWorker(server, "text");
    const base = `${server.url}/v2/text`;
    const headers = bearer(server.key);
    const runsync = async (seed: number) => {
      const res = await fetch(`${base}/runsync`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: { prompt: PROMPT, sampling_params: { max_tokens: tokens, temperature: 1, seed } } }),
      });
      const body = (await res.json()) as { status: string; output?: { usage: { output: number } }[] };
      if (body.status !== "COMPLETED") throw new Error(`runsync: ${JSON.stringify(body)}`);
      return body.output![0]!.usage.output;
    };
    const sse = async (seed: number) => {
      const res = await fetch(`${base}/openai/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          model: "bench",
          messages: [{ role: "user", content: PROMPT }],
          max_tokens: tokens,
          seed,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      const text = await res.text();
      if (!res.ok || !text.includes("data: [DONE]")) throw new Error(`stream: ${res.status} ${text.slice(-300)}`);
      const usage = [...text.matchAll(/"completion_tokens":(\d+)/g)].at(-1);
      return Number(usage?.[1] ?? 0);
    };
    for (const c of [1, 4]) await measure("endpoint /runsync", c, runsync);
    for (const c of [1, 4]) await measure("endpoint /openai/v1 stream", c, sse);
  } finally {
    await stopProcess(server.proc, 10_000);
  }
}

const gpuTypes = await getLlamaGpuTypes("supported");
const gpus = gpuTypes.filter(Boolean);
console.log(
  `bench-text: ${flags.model ? model : "tiny demo GGUF (generated)"}, device ${device}, ${tokens} tokens per request, ${rounds} rounds, ${sequences} sequences`,
);
const m = machine();
console.log(`machine: ${m.cores} x ${m.cpu}; GPU: ${gpus.length ? gpus.join(", ") : "none on this machine: CPU figures only"}`);
const latency: LatencyRow[] = [];
try {
  if (!flags["latency-only"]) {
    await direct();
    await throughEndpoint();
  }
  const settings = { model, dir, tokens: streamTokens, speeds, concurrencies: streams, rounds: 2, prompt: PROMPT, flushMs };
  latency.push(...(await directLatency(settings)), ...(await spoolLatency(settings)));
} finally {
  await cleanup.run();
}

const directRate = new Map(rows.filter((r) => r.path.endsWith("direct")).map((r) => [r.concurrency, r.tokens / r.seconds]));
const tableRows = rows.map((r) => {
  const rate = r.tokens / r.seconds;
  const ratio = rate / directRate.get(r.concurrency)!;
  return [r.path, String(r.concurrency), String(r.requests), String(r.tokens), r.seconds.toFixed(2), rate.toFixed(0), ratio.toFixed(2)];
});
console.log("");
printTable(["path", "concurrent", "requests", "tokens", "s", "tokens/s", "vs direct"], "lrrrrrr", tableRows);

console.log("");
console.log(
  `streaming latency: ${streamTokens} tokens a stream, ${flushMs === undefined ? "streamFlushMs default" : `streamFlushMs ${flushMs}`}; ms`,
);
const directItl = new Map(latency.filter((r) => r.path.endsWith("direct")).map((r) => [`${r.tokensPerSecond}x${r.concurrency}`, r]));
printTable(
  ["path", "tokens/s", "streams", "n", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "ITL p99 - direct", "posts/token"],
  "lrrrrrrrrr",
  latency.map((r) => [
    r.path,
    String(r.tokensPerSecond),
    String(r.concurrency),
    String(r.streams),
    r.ttftP50.toFixed(1),
    r.ttftP99.toFixed(1),
    r.itlP50.toFixed(1),
    r.itlP99.toFixed(1),
    (r.itlP99 - directItl.get(`${r.tokensPerSecond}x${r.concurrency}`)!.itlP99).toFixed(1),
    r.postsPerToken === undefined ? "" : r.postsPerToken.toFixed(2),
  ]),
);
