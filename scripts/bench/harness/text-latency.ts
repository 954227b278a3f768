import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { getLlama, LlamaCompletion, LlamaLogLevel, type LlamaContext } from "node-llama-cpp";
import { stopProcess } from "./processes.ts";
import { bearer, waitForIdleWorker } from "./spool-http.ts";
import { REPO_ROOT, startSpool } from "./spool-process.ts";
import { summarize } from "./stats.ts";

/** One stream's timings (ms): when its first text arrived, and the gaps between texts after it. */
interface StreamTimes {
  ttft: number;
  gaps: number[];
  tokens: number;
}

export interface LatencyRow {
  path: string;
  tokensPerSecond: number;
  concurrency: number;
  streams: number;
  ttftP50: number;
  ttftP99: number;
  itlP50: number;
  itlP99: number;
  /** Worker posts of stream chunks per generated token (through Spool only). */
  postsPerToken?: number;
}

export interface LatencySettings {
  model: string;
  dir: string;
  tokens: number;
  speeds: number[];
  concurrencies: number[];
  rounds: number;
  prompt: string;
  /** The endpoints' streamFlushMs; unset: the endpoint default. */
  flushMs?: number;
}

const rowOf = (path: string, tokensPerSecond: number, concurrency: number, all: StreamTimes[], postsPerToken?: number): LatencyRow => {
  const ttft = summarize(all.map((s) => s.ttft));
  const itl = summarize(all.flatMap((s) => s.gaps));
  return {
    path,
    tokensPerSecond,
    concurrency,
    streams: all.length,
    ttftP50: ttft.p50,
    ttftP99: ttft.p99,
    itlP50: itl.p50,
    itlP99: itl.p99,
    postsPerToken,
  };
};

/**
 * node-llama-cpp directly on the same model, each token handed on no sooner than its turn at
 * the given speed, exactly as the text endpoint's tokenDelayMs paces it.
 */
export async function directLatency(s: LatencySettings): Promise<LatencyRow[]> {
  const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, progressLogs: false, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: s.model, gpuLayers: 0 });
  const rows: LatencyRow[] = [];
  const one = async (context: LlamaContext, pace: number, seed: number): Promise<StreamTimes> => {
    const seq = context.getSequence();
    const completion = new LlamaCompletion({ contextSequence: seq });
    const start = performance.now();
    let due = start;
    let last = 0;
    const times: StreamTimes = { ttft: 0, gaps: [], tokens: 0 };
    await completion.generateCompletion(s.prompt, {
      maxTokens: s.tokens,
      temperature: 1,
      seed,
      onToken: (t) => {
        // A token is handed on at its turn, or when it is made if that is later (no timer: the
        // time it would be handed on is exact, whatever the event loop is doing).
        const now = performance.now();
        due = Math.max(due, now - pace) + pace * t.length;
        const at = Math.max(now, due);
        times.tokens += t.length;
        if (last === 0) times.ttft = at - start;
        else times.gaps.push(at - last);
        last = at;
      },
    });
    completion.dispose();
    seq.dispose();
    return times;
  };
  for (const speed of s.speeds) {
    for (const c of s.concurrencies) {
      const all: StreamTimes[] = [];
      for (let r = 0; r < s.rounds; r++) {
        // A context of c sequences per round, on the threads the text handler uses (one less than the cores).
        const context = await model.createContext({ sequences: c, contextSize: 2048, threads: Math.max(1, llama.cpuMathCores - 1) });
        all.push(...(await Promise.all(Array.from({ length: c }, (_, i) => one(context, 1000 / speed, r * c + i)))));
        await context.dispose();
      }
      rows.push(rowOf("node-llama-cpp direct", speed, c, all));
    }
  }
  await model.dispose();
  await llama.dispose();
  return rows;
}

/** Spool's OpenAI route, streamed: one endpoint per speed, its model paced by tokenDelayMs. */
export async function spoolLatency(s: LatencySettings): Promise<LatencyRow[]> {
  const configPath = join(s.dir, "latency.toml");
  const sequences = Math.max(...s.concurrencies);
  writeFileSync(
    configPath,
    `[server]\nhost = "127.0.0.1"\n` +
      s.speeds
        .map(
          (speed) =>
            `\n[endpoints.text${speed}]\nhandler = ${JSON.stringify(join(REPO_ROOT, "handlers/text/handler.ts"))}\nworkersMin = 1\nworkersMax = 1\nidleTimeout = 3600\n` +
            `[endpoints.text${speed}.options]\nmodel = ${JSON.stringify(s.model)}\nmodelName = "bench"\nsequences = ${sequences}\ncontextSize = 2048\n` +
            `tokenDelayMs = ${1000 / speed}\n${s.flushMs === undefined ? "" : `streamFlushMs = ${s.flushMs}\n`}`,
        )
        .join(""),
  );
  const server = await startSpool({
    name: "spool serve",
    dataDir: join(s.dir, "latency-data"),
    configPath,
    cwd: s.dir,
    readyTimeoutMs: 30_000,
  });
  const rows: LatencyRow[] = [];
  try {
    const headers = bearer(server.key);
    const posts = async () => {
      const text = await (await fetch(`${server.url}/metrics`, { headers })).text();
      return [
        ...text.matchAll(
          /^spool_http_requests_total\{method="POST",route="\/v2\/:endpoint\/job-stream\/:worker\/:job",status="200"\} (\d+)/gm,
        ),
      ].reduce((n, m) => n + Number(m[1]), 0);
    };
    const one = async (endpoint: string, seed: number): Promise<StreamTimes> => {
      const start = performance.now();
      const res = await fetch(`${server.url}/v2/${endpoint}/openai/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          model: "bench",
          messages: [{ role: "user", content: s.prompt }],
          max_tokens: s.tokens,
          seed,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      if (!res.ok || !res.body) throw new Error(`stream: HTTP ${res.status} ${await res.text()}`);
      const times: StreamTimes = { ttft: 0, gaps: [], tokens: 0 };
      let last = 0;
      let buffered = "";
      const decoder = new TextDecoder();
      for await (const bytes of res.body) {
        buffered += decoder.decode(bytes, { stream: true });
        const now = performance.now();
        let cut: number;
        while ((cut = buffered.indexOf("\n\n")) !== -1) {
          const event = buffered.slice(0, cut);
          buffered = buffered.slice(cut + 2);
          const data = event.startsWith("data: ") ? event.slice(6) : "";
          if (!data || data === "[DONE]") continue;
          const chunk = JSON.parse(data) as { choices: { delta?: { content?: string } }[]; usage?: { completion_tokens: number } | null };
          if (chunk.usage) times.tokens = chunk.usage.completion_tokens;
          if (!chunk.choices[0]?.delta?.content) continue;
          if (last === 0) times.ttft = now - start;
          else times.gaps.push(now - last);
          last = now;
        }
      }
      return times;
    };
    for (const speed of s.speeds) {
      const endpoint = `text${speed}`;
      await waitForIdleWorker(server, endpoint);
      await one(endpoint, 0); // warm-up
      for (const c of s.concurrencies) {
        const before = await posts();
        const all: StreamTimes[] = [];
        for (let r = 0; r < s.rounds; r++)
          all.push(...(await Promise.all(Array.from({ length: c }, (_, i) => one(endpoint, r * c + i + 1)))));
        const tokens = all.reduce((n, t) => n + t.tokens, 0);
        rows.push(rowOf("Spool /openai/v1 stream", speed, c, all, ((await posts()) - before) / tokens));
      }
    }
  } finally {
    await stopProcess(server.proc, 10_000);
  }
  return rows;
}
