#!/usr/bin/env bun
/**
 * Text endpoint benchmark: generated tokens per second for 1 and 4 concurrent requests through
 * the endpoint (a `spool serve` process whose scaler runs one text worker process), against
 * node-llama-cpp called directly in this process on the same model with the same context
 * settings (sequences, threads), and the ratio of the two (the queue's overhead).
 *
 *   bun scripts/bench-text.ts [--model FILE.gguf] [--device cpu|cuda|vulkan] [--tokens 256]
 *       [--rounds 4] [--sequences 4] [--threads 0]
 *
 * Without --model it generates the tiny demo GGUF (tokens are cheap there, so the ratio shows
 * the most overhead the queue can add). Through the endpoint it measures POST /runsync
 * (worker-vllm input, not streamed) and POST /openai/v1/chat/completions with stream: true
 * (SSE, read to [DONE]). It prints figures and asserts only that every request succeeded.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, getLlamaGpuTypes, LlamaCompletion, LlamaLogLevel } from "node-llama-cpp";
import { writeTinyGguf } from "../handlers/text/tiny-gguf.ts";

const ROOT = resolve(import.meta.dir, "..");
const USAGE = "usage: bun scripts/bench-text.ts [--model FILE.gguf] [--device cpu|cuda|vulkan] [--tokens 256] [--rounds 4] [--sequences 4] [--threads 0]";
const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    model: { type: "string" },
    device: { type: "string", default: "cpu" },
    tokens: { type: "string", default: "256" },
    rounds: { type: "string", default: "4" },
    sequences: { type: "string", default: "4" },
    threads: { type: "string", default: "0" },
    help: { type: "boolean", short: "h" },
  },
});
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
const int = (name: string, v: string, min: number) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    console.error(`bench-text: --${name} must be an integer >= ${min}\n${USAGE}`);
    process.exit(2);
  }
  return n;
};
const device = flags.device as "cpu" | "cuda" | "vulkan";
if (!["cpu", "cuda", "vulkan"].includes(device)) int("device", "x", 0);
const tokens = int("tokens", flags.tokens!, 1);
const rounds = int("rounds", flags.rounds!, 1);
const sequences = int("sequences", flags.sequences!, 1);
const threadsFlag = int("threads", flags.threads!, 0);

const dir = mkdtempSync(join(tmpdir(), "spool-bench-text-"));
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
  const llama = await getLlama({ gpu: device === "cpu" ? false : device, build: "never", skipDownload: true, progressLogs: false, logLevel: LlamaLogLevel.error });
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
  const port = 20000 + Math.floor(Math.random() * 20000);
  const config = join(dir, "spool.toml");
  writeFileSync(
    config,
    `[server]\nport = ${port}\nhost = "127.0.0.1"\ndata = ${JSON.stringify(join(dir, "data"))}\n\n` +
      `[endpoints.text]\nhandler = ${JSON.stringify(join(ROOT, "handlers/text/handler.ts"))}\nworkersMin = 1\nworkersMax = 1\nidleTimeout = 3600\n` +
      `[endpoints.text.options]\nmodel = ${JSON.stringify(model)}\nmodelName = "bench"\ndevice = "${device}"\nsequences = ${sequences}\ncontextSize = ${contextSize}\nthreads = ${threadsFlag}\n`,
  );
  const server = Bun.spawn([process.execPath, join(ROOT, "runtime/cli.ts"), "serve", "--config", config], { stdout: "pipe", stderr: "pipe", cwd: dir });
  try {
    // Keep draining the server's output, so that its logging never blocks on a full pipe.
    let out = "";
    const drain = async (stream: ReadableStream<Uint8Array>) => {
      const decoder = new TextDecoder();
      for await (const bytes of stream) out += decoder.decode(bytes, { stream: true });
    };
    void drain(server.stdout);
    void drain(server.stderr);
    for (let i = 0; !/listening on/.test(out); i++) {
      if (server.exitCode !== null || i > 300) throw new Error(`the server did not start:\n${out}`);
      await Bun.sleep(100);
    }
    const key = out.match(/spool_[A-Za-z0-9_-]+/)?.[0];
    if (!key) throw new Error(`server printed no key:\n${out}`);
    const base = `http://127.0.0.1:${port}/v2/text`;
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    for (let i = 0; ; i++) {
      const health = (await (await fetch(`${base}/health`, { headers })).json()) as { workers: { idle: number } };
      if (health.workers.idle >= 1) break;
      if (i > 600) throw new Error("the text worker did not start within 60 s");
      await Bun.sleep(100);
    }
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
        body: JSON.stringify({ model: "bench", messages: [{ role: "user", content: PROMPT }], max_tokens: tokens, seed, stream: true, stream_options: { include_usage: true } }),
      });
      const text = await res.text();
      if (!res.ok || !text.includes("data: [DONE]")) throw new Error(`stream: ${res.status} ${text.slice(-300)}`);
      const usage = [...text.matchAll(/"completion_tokens":(\d+)/g)].at(-1);
      return Number(usage?.[1] ?? 0);
    };
    for (const c of [1, 4]) await measure("endpoint /runsync", c, runsync);
    for (const c of [1, 4]) await measure("endpoint /openai/v1 stream", c, sse);
  } finally {
    server.kill("SIGTERM");
    await server.exited;
  }
}

const gpuTypes = await getLlamaGpuTypes("supported");
const gpus = gpuTypes.filter(Boolean);
console.log(`bench-text: ${flags.model ? model : "tiny demo GGUF (generated)"}, device ${device}, ${tokens} tokens per request, ${rounds} rounds, ${sequences} sequences`);
console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "cpu"}; GPU: ${gpus.length ? gpus.join(", ") : "none on this machine (no GPU machine in this session): CPU figures only"}`);
try {
  await direct();
  await throughEndpoint();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const directRate = new Map(rows.filter((r) => r.path.endsWith("direct")).map((r) => [r.concurrency, r.tokens / r.seconds]));
console.log("\n| path | concurrent | requests | tokens | s | tokens/s | vs direct |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  const rate = r.tokens / r.seconds;
  const ratio = rate / directRate.get(r.concurrency)!;
  console.log(`| ${r.path} | ${r.concurrency} | ${r.requests} | ${r.tokens} | ${r.seconds.toFixed(2)} | ${rate.toFixed(0)} | ${ratio.toFixed(2)} |`);
}
