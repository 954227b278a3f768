import { readFile } from "node:fs/promises";
import type * as ort from "onnxruntime-node";
import { executionProvider } from "./device.ts";
import { imageIds, imageTokens, initialNoise, toRgb, unpackLatents, VAE_SCALE } from "./latents.ts";
import { resolveLayout } from "./model-layout.ts";
import { OnnxComponent, type Feed, type Port } from "./onnx-component.ts";
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
  /** The guidance embedding's value (dev-style models; diffusers' guidance_scale). */
  guidance: number;
  seed: number;
  /** True classifier-free guidance against negativePrompt at this scale (two predictions per step); off when unset or <= 1. */
  trueCfgScale?: number;
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
 * A FLUX text-to-image pipeline on ONNX Runtime, loaded once from a diffusers/optimum-style ONNX
 * folder and kept resident: text encoders, flow-matching transformer, flow-match Euler, VAE
 * decoder. Each graph's input and output names and element types come from its session; values
 * cross a graph's boundary converted to what it declares (fp32 or fp16, per graph), and the
 * scheduler's arithmetic stays in fp32 on the host.
 */
export class FluxPipeline {
  private constructor(
    readonly root: string,
    private readonly text: TextEncoders,
    /** The transformer and VAE graphs, exposed so benchmarks can call the same graphs directly. */
    readonly transformer: OnnxComponent,
    readonly vae: OnnxComponent,
    private readonly scheduler: SchedulerConfig,
    private readonly vaeConfig: VaeConfig,
    private readonly packedChannels: number,
    private readonly velocityOut: Port,
    private readonly sampleOut: Port,
    private readonly latentIn: string,
  ) {}

  /** Whether the transformer takes a guidance embedding (FLUX.1-dev does; schnell does not). */
  get hasGuidanceEmbedding(): boolean {
    return this.transformer.inputs.has("guidance");
  }

  /** The element type of every graph's float inputs and outputs, e.g. {transformer: "float16", ...}. */
  get precisions(): Record<string, string> {
    const of = (c: OnnxComponent) =>
      [...new Set([...c.inputs.values(), ...c.outputs.values()].map((p) => p.type).filter((t) => t.startsWith("float")))].join("+");
    return { transformer: of(this.transformer), vae_decoder: of(this.vae), ...this.text.precisions };
  }

  static async load(root: string, options: { device: Device; maxSequenceLength: number }): Promise<FluxPipeline> {
    const layout = resolveLayout(root);
    const readJson = async (path: string | undefined) => (path ? JSON.parse(await readFile(path, "utf8")) : {});
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: [executionProvider(options.device)],
      graphOptimizationLevel: "all",
      logSeverityLevel: 3,
    };
    const loaded = await Promise.allSettled([
      TextEncoders.load(layout, sessionOptions, options.maxSequenceLength),
      OnnxComponent.load(root, layout.transformer, sessionOptions),
      OnnxComponent.load(root, layout.vaeDecoder, sessionOptions),
    ]);
    const failed = loaded.find((r) => r.status === "rejected");
    const [text, transformer, vae] = loaded.map((r) => (r.status === "fulfilled" ? r.value : undefined)) as [
      TextEncoders?,
      OnnxComponent?,
      OnnxComponent?,
    ];
    try {
      if (failed) throw failed.reason;
      const [scheduler, vaeConfig, transformerConfig] = await Promise.all([
        readJson(layout.scheduler),
        readJson(layout.vaeConfig),
        readJson(layout.transformerConfig),
      ]);
      const t = transformer!;
      for (const name of ["hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids", "txt_ids"])
        t.requireFloat(t.input(name));
      if (t.inputs.has("guidance")) t.requireFloat(t.input("guidance"));
      // optimum names it out_hidden_states, BFL's exports latent, others sample
      const velocityOut = t.requireFloat(t.output("out_hidden_states", "latent", "sample"));
      const latentIn = vae!.requireFloat(vae!.input(vae!.inputs.size === 1 ? [...vae!.inputs.keys()][0]! : "latent_sample")).name;
      const sampleOut = vae!.requireFloat(vae!.output("sample"));
      const declared = t.input("hidden_states").shape[2];
      return new FluxPipeline(
        root,
        text!,
        t,
        vae!,
        { ...SCHEDULER_DEFAULTS, ...scheduler },
        { latent_channels: 16, scaling_factor: 0.3611, shift_factor: 0.1159, ...vaeConfig },
        typeof declared === "number" ? declared : (transformerConfig.in_channels ?? 64),
        velocityOut,
        sampleOut,
        latentIn,
      );
    } catch (err) {
      await Promise.all([text?.dispose(), transformer?.release(), vae?.release()]);
      throw err;
    }
  }

  /** Generates one image; returns interleaved 8-bit RGB of width x height. */
  async generate(req: GenerateRequest, hooks: GenerateHooks = {}): Promise<Uint8Array> {
    const { signal } = hooks;
    const stop = () => {
      if (signal?.aborted) throw signal.reason ?? new Error("generation stopped");
    };
    const { rows, cols, count } = imageTokens(req.width, req.height);
    const cfgScale = req.negativePrompt !== undefined && (req.trueCfgScale ?? 1) > 1 ? req.trueCfgScale! : undefined;
    const positive = await this.text.encode(req.prompt);
    const negative = cfgScale !== undefined ? await this.text.encode(req.negativePrompt!) : undefined;
    stop();
    const batch = negative ? 2 : 1;
    const cond = negative ? stack([positive, negative]) : positive;
    const textLen = cond.t5.dims[1]!;
    // diffusers >= 0.31 exports take ids as [seq, 3]; older ones as [1, seq, 3]
    const idDims = (n: number) => (this.#rank("img_ids") === 3 ? [1, n, 3] : [n, 3]);
    const fixed: Record<string, Feed> = {
      encoder_hidden_states: cond.t5,
      pooled_projections: cond.pooled,
      img_ids: { data: imageIds(rows, cols), dims: idDims(count) },
      txt_ids: { data: new Float32Array(textLen * 3), dims: idDims(textLen) },
    };
    if (this.hasGuidanceEmbedding) fixed.guidance = { data: new Float32Array(batch).fill(req.guidance), dims: [batch] };
    // The same for every step of this job: converted (fp16 where the graph wants it) once.
    const constant = this.transformer.tensors(fixed);

    const C = this.packedChannels;
    const latents = initialNoise(req.seed, count, C);
    const sigmas = flowMatchSigmas(req.steps, count, this.scheduler);
    const size = count * C;
    const input = new Float32Array(size * batch);
    for (let i = 0; i < req.steps; i++) {
      stop();
      for (let b = 0; b < batch; b++) input.set(latents, b * size);
      const [out] = await this.transformer.run(
        {
          hidden_states: { data: input, dims: [batch, count, C] },
          timestep: { data: new Float32Array(batch).fill(sigmas[i]!), dims: [batch] },
        },
        [this.velocityOut],
        constant,
      );
      const v = out!.data;
      const velocity = negative ? guided(v.subarray(0, size), v.subarray(size, 2 * size), cfgScale!) : v;
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
    const [sample] = await this.vae.run({ [this.latentIn]: { data: z, dims: [1, ch, height / VAE_SCALE, width / VAE_SCALE] } }, [
      this.sampleOut,
    ]);
    if (sample!.dims[2] !== height || sample!.dims[3] !== width) {
      throw new Error(`the VAE decoder returned ${sample!.dims.join("x")}, expected [1, 3, ${height}, ${width}]`);
    }
    return toRgb(sample!.data, width, height);
  }

  /** The rank a transformer input is declared with (0 when the graph does not say). */
  #rank(name: string): number {
    return this.transformer.inputs.get(name)?.shape.length ?? 0;
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
  const cat = (ts: Feed[]) => {
    const data = new Float32Array(ts.reduce((n, t) => n + t.data.length, 0));
    let at = 0;
    for (const t of ts) {
      data.set(t.data as Float32Array, at);
      at += t.data.length;
    }
    return { data, dims: [ts.length, ...ts[0]!.dims.slice(1)] };
  };
  return { t5: cat(parts.map((p) => p.t5)), pooled: cat(parts.map((p) => p.pooled)) };
}
