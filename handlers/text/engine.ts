import type { ChatHistoryItem, ChatWrapper, Llama, LlamaContext, LlamaContextSequence, LlamaModel, LlamaText, Token } from "node-llama-cpp";
import { HandlerError } from "../../sdk/index.ts";
import { loadOptional } from "../optional-packages.ts";
import { EngineStats, type EngineMetrics } from "./engine-stats.ts";

export type Device = "cpu" | "cuda" | "vulkan";

export interface EngineSettings {
  /** A GGUF file that validateGguf() has accepted. */
  modelPath: string;
  device: Device;
  /** Sequences of the one context: jobs generating at once, evaluated in shared batches. */
  sequences: number;
  /** Tokens per sequence. */
  contextSize: number;
  /** CPU threads; 0: one less than the cores. */
  threads: number;
  /** Each token is handed on no sooner than this long after the one before (0: at once). */
  tokenDelayMs?: number;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface GenerateRequest {
  input: { messages: ChatMessage[] } | { prompt: string };
  maxTokens: number;
  /** 0 is greedy. */
  temperature: number;
  /** 1: off. */
  topP: number;
  /** 0: off. */
  topK: number;
  stop: string[];
  seed?: number;
  signal: AbortSignal;
}

/** First the prompt's size (once it has a sequence), then text as it is generated. */
export type GenerationEvent = { type: "prompt"; inputTokens: number } | { type: "text"; text: string; tokens: number };

export interface GenerationEnd {
  inputTokens: number;
  outputTokens: number;
  /** OpenAI's names: "length" when max_tokens (or the context) ended it. */
  finishReason: "stop" | "length";
}

/** A clear startup error for a device that this machine cannot use; never a silent fallback. */
function deviceError(device: Device, cause: unknown): Error {
  const need =
    device === "cuda"
      ? "an NVIDIA GPU with its driver, and CUDA 13 (libcudart.so.13, libcublas.so.13) or CUDA 12 runtime libraries"
      : "a GPU whose driver provides Vulkan (libvulkan.so.1 and an ICD)";
  return new Error(
    `text handler: device "${device}" is not available on this machine (node-llama-cpp has no usable ${device} build here; it needs ${need}). ` +
      `Set device = "cpu" in [endpoints.<id>.options], or run this endpoint's workers on a machine with that GPU.`,
    { cause },
  );
}

/**
 * One GGUF model in llama.cpp (through node-llama-cpp), with one context of several sequences:
 * concurrent generations each take a sequence, and llama.cpp evaluates them in shared batches.
 */
export class TextEngine {
  readonly stats = new EngineStats();
  readonly #active = new Set<LlamaContextSequence>();
  readonly #waiters: (() => void)[] = [];
  #disposed = false;

  private constructor(
    readonly settings: EngineSettings,
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
    private readonly lib: typeof import("node-llama-cpp"),
  ) {}

  /**
   * Loads llama.cpp for the device (a clear error when this machine has none), then the model
   * that `modelFile` resolves (after the device check, so a wrong device fails before a
   * download), and its context.
   */
  static async load(config: Omit<EngineSettings, "modelPath">, modelFile: () => Promise<string>): Promise<TextEngine> {
    const lib = await loadOptional("text", () => import("node-llama-cpp"));
    let llama: Llama;
    try {
      llama = await lib.getLlama({
        gpu: config.device === "cpu" ? false : config.device,
        build: "never",
        skipDownload: true,
        progressLogs: false,
        logLevel: lib.LlamaLogLevel.warn,
      });
    } catch (err) {
      throw deviceError(config.device, err);
    }
    if ((llama.gpu || "cpu") !== config.device) throw deviceError(config.device, `getLlama gave ${llama.gpu || "cpu"}`);
    try {
      const settings = { ...config, modelPath: await modelFile() };
      // "auto": as many layers as the card holds (node-llama-cpp measures free VRAM), the rest on
      // the CPU; "max" fails outright on a card too small for the whole model.
      const model = await llama.loadModel({ modelPath: settings.modelPath, gpuLayers: settings.device === "cpu" ? 0 : "auto" });
      if (settings.device !== "cpu") {
        // The cards' names say which devices the backend saw (Vulkan numbers them its own way).
        const gpus = await llama.getGpuDeviceNames().catch(() => []);
        process.stderr.write(
          `${JSON.stringify({ time: new Date().toISOString(), level: "info", msg: "text model layers placed", device: settings.device, gpus, gpuLayers: model.gpuLayers, totalLayers: model.fileInsights.totalLayers })}\n`,
        );
      }
      const context = await model.createContext({
        sequences: settings.sequences,
        contextSize: settings.contextSize,
        // All cores oversubscribe a machine that also runs the worker (measured: 30x slower on 2 cores).
        threads: settings.threads || Math.max(1, llama.cpuMathCores - 1),
      });
      const chatWrapper = lib.resolveChatWrapper(model) ?? new lib.GeneralChatWrapper();
      return new TextEngine(settings, llama, model, context, chatWrapper, lib);
    } catch (err) {
      await llama.dispose();
      throw err;
    }
  }

  /** The engine-wide stream metrics as of now. */
  metrics(): EngineMetrics {
    let used = 0;
    for (const seq of this.#active) used += seq.nextTokenIndex;
    const cells = this.context.contextSize * this.settings.sequences;
    return this.stats.metrics(performance.now(), used / cells, this.settings.device !== "cpu");
  }

  /** Tokens of a prompt, or of messages laid out by the model's chat template, and its stop texts. */
  #tokenize(input: GenerateRequest["input"]): { tokens: Token[]; stops: LlamaText[] } {
    if ("prompt" in input) {
      const tokens = this.model.tokenize(input.prompt);
      const bos = this.model.tokens.bos;
      if (this.model.tokens.shouldPrependBosToken && bos !== null) tokens.unshift(bos);
      return { tokens, stops: [] };
    }
    const history: ChatHistoryItem[] = input.messages.map((m) =>
      m.role === "assistant" ? { type: "model", response: [m.content] } : { type: m.role, text: m.content },
    );
    if (input.messages.at(-1)?.role !== "assistant") history.push({ type: "model", response: [] });
    const state = this.chatWrapper.generateContextState({ chatHistory: history });
    return { tokens: state.contextText.tokenize(this.model.tokenizer), stops: state.stopGenerationTriggers };
  }

  /** Waits for a free sequence (counted as pending meanwhile). */
  async #acquire(signal: AbortSignal): Promise<LlamaContextSequence> {
    if (this.#disposed) throw new Error("the text engine was disposed");
    this.stats.pending++;
    try {
      while (this.context.sequencesLeft === 0) {
        signal.throwIfAborted();
        await new Promise<void>((resolve) => {
          const wake = () => {
            signal.removeEventListener("abort", wake);
            const i = this.#waiters.indexOf(wake);
            if (i >= 0) this.#waiters.splice(i, 1);
            resolve();
          };
          this.#waiters.push(wake);
          signal.addEventListener("abort", wake, { once: true });
        });
      }
      signal.throwIfAborted();
    } finally {
      this.stats.pending--;
    }
    const seq = this.context.getSequence();
    this.#active.add(seq);
    return seq;
  }

  #release(seq: LlamaContextSequence): void {
    this.#active.delete(seq);
    seq.dispose();
    this.#waiters[0]?.();
  }

  /**
   * Generates on a sequence of its own. Yields the prompt size first, then text with the number
   * of tokens that made it; returns the totals. `signal` ends generation early (the text so far
   * stands). Throws HandlerError (type invalid_request_error) when the prompt fills the context.
   */
  async *generate(req: GenerateRequest): AsyncGenerator<GenerationEvent, GenerationEnd> {
    const seq = await this.#acquire(req.signal);
    const started = performance.now();
    this.stats.started(started);
    const stop = new AbortController();
    const completion = new this.lib.LlamaCompletion({ contextSequence: seq });
    let running: Promise<void> | undefined;
    try {
      const { tokens, stops } = this.#tokenize(req.input);
      const room = this.context.contextSize - tokens.length;
      if (room <= 0) {
        throw new HandlerError(`the prompt has ${tokens.length} tokens; this model's context holds ${this.context.contextSize}`, {
          type: "invalid_request_error",
        });
      }
      yield { type: "prompt", inputTokens: tokens.length };

      const queue: GenerationEvent[] = [];
      let wake: (() => void) | undefined;
      let unsent = 0;
      let outputTokens = 0;
      let first = true;
      let end: { stopReason: string } | undefined;
      let failure: unknown;
      const maxTokens = Math.min(req.maxTokens, room);
      running = completion
        .generateCompletionWithMeta(tokens, {
          maxTokens,
          temperature: req.temperature,
          topP: req.topP,
          topK: req.topK,
          seed: req.seed,
          customStopTriggers: [...req.stop.filter(Boolean), ...stops],
          signal: AbortSignal.any([req.signal, stop.signal]),
          stopOnAbortSignal: true,
          disableContextShift: true,
          onToken: (t) => {
            const now = performance.now();
            if (first) this.stats.prompt(tokens.length, now - started, now);
            first = false;
            this.stats.generated(t.length, now);
            // A token that ends in half a character is held until the next one completes it,
            // also when it was the last one allowed, so node-llama-cpp can give one token more
            // than maxTokens: the count a client sees (and pays for) stops at what it asked for.
            const counted = Math.min(t.length, maxTokens - outputTokens);
            unsent += counted;
            outputTokens += counted;
          },
          onTextChunk: (text) => {
            queue.push({ type: "text", text, tokens: unsent });
            unsent = 0;
            wake?.();
          },
        })
        .then(
          (r) => void (end = r.metadata),
          (err) => void (failure = err ?? new Error("generation failed")),
        )
        .finally(() => wake?.());

      // A paced engine (tokenDelayMs) stands for a slower model: each token waits for its turn.
      const pace = this.settings.tokenDelayMs ?? 0;
      let due = performance.now();
      const paced = async (event: GenerationEvent) => {
        if (!pace || event.type !== "text" || !event.tokens) return event;
        due = Math.max(due, performance.now() - pace) + pace * event.tokens;
        const wait = due - performance.now();
        if (wait > 0) await Bun.sleep(wait);
        return event;
      };
      for (;;) {
        while (queue.length) yield await paced(queue.shift()!);
        if (end || failure) break;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      while (queue.length) yield await paced(queue.shift()!);
      if (failure) throw failure;
      // Tokens that made no text (a stop text, half a character) still count.
      if (unsent) yield { type: "text", text: "", tokens: unsent };
      return { inputTokens: tokens.length, outputTokens, finishReason: end!.stopReason === "maxTokens" ? "length" : "stop" };
    } finally {
      stop.abort();
      await running;
      completion.dispose({ disposeSequence: false });
      this.stats.ended();
      this.#release(seq);
    }
  }

  /** Frees the context, the model and llama.cpp; idempotent. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const wake of [...this.#waiters]) wake();
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}
