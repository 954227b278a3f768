import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { executionProvider } from "./device.ts";
import { imageIds, imageTokens, initialNoise, toRgb, unpackLatents, VAE_SCALE } from "./latents.ts";
import type { Device } from "./options.ts";
import { eulerStep, flowMatchSigmas, SCHEDULER_DEFAULTS, type SchedulerConfig } from "./scheduler.ts";
import { TextEncoders, type TextEmbedding } from "./text-encoders.ts";

export interface GenerateRequest {
  prompt: string;
  /** With true CFG on, the prediction is pushed away from this prompt's. */
  negativePrompt?: string;
  width: number;
  height: number;
  steps: number;
  /** The guidance embedding's value (dev-style models) and the true-CFG scale. */
  guidance: number;
  seed: number;
  /** Classifier-free guidance against negativePrompt (two predictions per step). */
  trueCfg: boolean;
}

export interface GenerateHooks {
  /** Checked between steps: generation stops with its reason once it fires. */
  signal?: AbortSignal;
  /** Awaited after each step (the handler posts progress here). */
  onStep?: (step: number, steps: number) => Promise<void> | void;
}

interface VaeConfig {
  latent_channels: number;
  scaling_factor: number;
  shift_factor: number;
}

/**
 * A FLUX text-to-image pipeline on ONNX Runtime, loaded once from a diffusers-style ONNX folder
 * and kept resident: text encoders, flow-matching transformer, flow-match Euler, VAE decoder.
 */
export class FluxPipeline {
  private constructor(
    readonly root: string,
    private readonly text: TextEncoders,
    /** The transformer and VAE sessions, exposed so benchmarks can call the same graphs directly. */
    readonly transformer: ort.InferenceSession,
    readonly vae: ort.InferenceSession,
    private readonly scheduler: SchedulerConfig,
    private readonly vaeConfig: VaeConfig,
    private readonly packedChannels: number,
  ) {}

  /** Whether the transformer takes a guidance embedding (FLUX.1-dev does; schnell does not). */
  get hasGuidanceEmbedding(): boolean {
    return this.transformer.inputNames.includes("guidance");
  }

  static async load(root: string, options: { device: Device; maxSequenceLength: number }): Promise<FluxPipeline> {
    const readJson = async (rel: string) => JSON.parse(await readFile(join(root, rel), "utf8"));
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: [executionProvider(options.device)],
      graphOptimizationLevel: "all",
      logSeverityLevel: 3,
    };
    const [text, transformer, vae, scheduler, vaeConfig, transformerConfig] = await Promise.all([
      TextEncoders.load(root, options.device, options.maxSequenceLength),
      ort.InferenceSession.create(join(root, "transformer/model.onnx"), sessionOptions),
      ort.InferenceSession.create(join(root, "vae_decoder/model.onnx"), sessionOptions),
      readJson("scheduler/scheduler_config.json"),
      readJson("vae_decoder/config.json"),
      readJson("transformer/config.json"),
    ]);
    return new FluxPipeline(
      root,
      text,
      transformer,
      vae,
      { ...SCHEDULER_DEFAULTS, ...scheduler },
      { latent_channels: 16, scaling_factor: 0.3611, shift_factor: 0.1159, ...vaeConfig },
      transformerConfig.in_channels ?? 64,
    );
  }

  /** Generates one image; returns interleaved 8-bit RGB of width x height. */
  async generate(req: GenerateRequest, hooks: GenerateHooks = {}): Promise<Uint8Array> {
    const { signal } = hooks;
    const stop = () => {
      if (signal?.aborted) throw signal.reason ?? new Error("generation stopped");
    };
    const { rows, cols, count } = imageTokens(req.width, req.height);
    const cfg = req.trueCfg && req.negativePrompt !== undefined;
    const positive = await this.text.encode(req.prompt);
    const negative = cfg ? await this.text.encode(req.negativePrompt!) : undefined;
    stop();
    const batch = negative ? 2 : 1;
    const cond = negative ? stack([positive, negative]) : positive;
    const textLen = cond.t5.dims[1]!;
    // diffusers >= 0.31 exports take ids as [seq, 3]; older ones as [1, seq, 3]
    const idDims = (n: number) => (this.#rank("img_ids") === 3 ? [1, n, 3] : [n, 3]);
    const fixed: Record<string, ort.Tensor> = {
      encoder_hidden_states: cond.t5,
      pooled_projections: cond.pooled,
      img_ids: new ort.Tensor("float32", imageIds(rows, cols), idDims(count)),
      txt_ids: new ort.Tensor("float32", new Float32Array(textLen * 3), idDims(textLen)),
    };
    if (this.hasGuidanceEmbedding) fixed.guidance = new ort.Tensor("float32", new Float32Array(batch).fill(req.guidance), [batch]);

    const C = this.packedChannels;
    const latents = initialNoise(req.seed, count, C);
    const sigmas = flowMatchSigmas(req.steps, count, this.scheduler);
    const size = count * C;
    const input = new Float32Array(size * batch);
    for (let i = 0; i < req.steps; i++) {
      stop();
      for (let b = 0; b < batch; b++) input.set(latents, b * size);
      const out = await this.transformer.run({
        ...fixed,
        hidden_states: new ort.Tensor("float32", input, [batch, count, C]),
        timestep: new ort.Tensor("float32", new Float32Array(batch).fill(sigmas[i]!), [batch]),
      });
      const v = out.out_hidden_states!.data as Float32Array;
      const velocity = negative ? guided(v.subarray(0, size), v.subarray(size, 2 * size), req.guidance) : v;
      eulerStep(latents, velocity, sigmas[i]!, sigmas[i + 1]!);
      await hooks.onStep?.(i + 1, req.steps);
    }
    stop();
    return this.decode(latents, rows, cols, req.width, req.height);
  }

  private async decode(latents: Float32Array, rows: number, cols: number, width: number, height: number): Promise<Uint8Array> {
    const { latent_channels: ch, scaling_factor, shift_factor } = this.vaeConfig;
    const z = unpackLatents(latents, rows, cols, ch);
    for (let i = 0; i < z.length; i++) z[i] = z[i]! / scaling_factor + shift_factor;
    const out = await this.vae.run({ latent_sample: new ort.Tensor("float32", z, [1, ch, height / VAE_SCALE, width / VAE_SCALE]) });
    const sample = out.sample!;
    if (sample.dims[2] !== height || sample.dims[3] !== width) {
      throw new Error(`the VAE decoder returned ${sample.dims.join("x")}, expected [1, 3, ${height}, ${width}]`);
    }
    return toRgb(sample.data as Float32Array, width, height);
  }

  /** The rank a transformer input is declared with (0 when the graph does not say). */
  #rank(name: string): number {
    const meta = this.transformer.inputMetadata.find((m) => m.name === name);
    return meta?.isTensor ? meta.shape.length : 0;
  }

  /** Releases every session; the pipeline cannot be used afterwards. Safe to call twice. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    await Promise.all([this.text.dispose(), this.transformer.release(), this.vae.release()]);
  }
  #disposed = false;
}

/** True classifier-free guidance: negative + scale * (positive - negative). */
function guided(pos: Float32Array, neg: Float32Array, scale: number): Float32Array {
  const out = new Float32Array(pos.length);
  for (let i = 0; i < pos.length; i++) out[i] = neg[i]! + scale * (pos[i]! - neg[i]!);
  return out;
}

function stack(parts: TextEmbedding[]): TextEmbedding {
  const cat = (ts: ort.Tensor[]) => {
    const data = new Float32Array(ts.reduce((n, t) => n + t.size, 0));
    let at = 0;
    for (const t of ts) {
      data.set(t.data as Float32Array, at);
      at += t.size;
    }
    return new ort.Tensor("float32", data, [ts.length, ...ts[0]!.dims.slice(1)]);
  };
  return { t5: cat(parts.map((p) => p.t5)), pooled: cat(parts.map((p) => p.pooled)) };
}
