/** How far back the throughput averages look, in ms (vLLM logs its averages over ~5-10 s). */
const WINDOW_MS = 10_000;

/** What the engine reports with each streamed chunk (the spec's stream metrics, engine-wide). */
export interface EngineMetrics {
  /** Generated tokens per second over the last 10 s of generation, across all sequences. */
  avg_gen_throughput: number;
  /** Prompt tokens evaluated per second, over the prompts of the last 10 s. */
  avg_prompt_throughput: number;
  /** Jobs generating now (sequences in use). */
  running: number;
  /** Jobs waiting for a free sequence. */
  pending: number;
  /** Always 0: llama.cpp never swaps sequences out. */
  swapped: number;
  /** Fraction (0..1) of the context's KV cells in use, on the GPU or the CPU by device. */
  gpu_kv_cache_usage: number;
  cpu_kv_cache_usage: number;
}

/** Counters and moving averages of one engine; times are performance.now() milliseconds. */
export class EngineStats {
  running = 0;
  pending = 0;
  /** Most sequences ever generating at the same time (tests assert batching with it). */
  peakRunning = 0;
  #busySince = 0;
  readonly #generated: { at: number; n: number }[] = [];
  readonly #prompts: { at: number; tokens: number; ms: number }[] = [];

  started(now: number): void {
    if (this.running === 0) this.#busySince = now;
    this.running++;
    this.peakRunning = Math.max(this.peakRunning, this.running);
  }

  ended(): void {
    this.running--;
  }

  prompt(tokens: number, ms: number, now: number): void {
    this.#prompts.push({ at: now, tokens, ms });
    this.#prune(now);
  }

  generated(n: number, now: number): void {
    this.#generated.push({ at: now, n });
    this.#prune(now);
  }

  #prune(now: number): void {
    while (this.#generated.length && this.#generated[0]!.at < now - WINDOW_MS) this.#generated.shift();
    while (this.#prompts.length && this.#prompts[0]!.at < now - WINDOW_MS) this.#prompts.shift();
  }

  /** Throughputs (tokens/s) and queue lengths as of `now`; `kvUsage` comes from the context. */
  metrics(now: number, kvUsage: number, onGpu: boolean): EngineMetrics {
    this.#prune(now);
    const span = now - Math.max(now - WINDOW_MS, this.#busySince);
    const tokens = this.#generated.reduce((a, g) => a + g.n, 0);
    const promptTokens = this.#prompts.reduce((a, p) => a + p.tokens, 0);
    const promptMs = this.#prompts.reduce((a, p) => a + p.ms, 0);
    const round = (x: number) => Math.round(x * 10) / 10;
    const usage = Math.round(Math.min(1, Math.max(0, kvUsage)) * 10_000) / 10_000;
    return {
      avg_gen_throughput: span > 0 ? round((tokens * 1000) / span) : 0,
      avg_prompt_throughput: promptMs > 0 ? round((promptTokens * 1000) / promptMs) : 0,
      running: this.running,
      pending: this.pending,
      swapped: 0,
      gpu_kv_cache_usage: onGpu ? usage : 0,
      cpu_kv_cache_usage: onGpu ? 0 : usage,
    };
  }
}
