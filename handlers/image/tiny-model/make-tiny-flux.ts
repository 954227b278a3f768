import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { SeededRandom } from "../random.ts";
import { clipTextEncoder, fluxTransformer, t5Encoder, vaeDecoder, type GraphFiles, type TinySizes } from "./tiny-graphs.ts";
import { clipTokenizerFiles, t5TokenizerFiles } from "./tiny-tokenizers.ts";

/** dev: guidance embedding, 28-step schedule with resolution-dependent shift; schnell: neither. */
export type TinyVariant = "dev" | "schnell";

/** How the tiny model is written: variant, weights, precision and the layout variants real exports use. */
export interface TinyFluxOptions {
  /** @default "dev" */
  variant?: TinyVariant;
  /** Seed of the random weights. @default 1 */
  seed?: number;
  /** Weights and arithmetic of every graph. @default "fp32" */
  precision?: "fp32" | "fp16";
  /** Float inputs and outputs of every graph (fp32 around fp16 weights is ONNX Runtime's fp16 optimizer with keep_io_types). @default precision */
  io?: "fp32" | "fp16";
  /** The transformer's folder (community exports use unet/). @default "transformer" */
  transformerFolder?: "transformer" | "unet";
  /** Weights beside each graph in this file instead of inside model.onnx. */
  externalData?: "model.onnx_data" | "model.onnx.data";
  /** The CLIP tokenizer as tokenizer.json (fast) or only vocab.json + merges.txt (as optimum saves it). @default "json" */
  clipTokenizer?: "json" | "vocab-merges";
  /** The transformer's output name (optimum: out_hidden_states). @default "out_hidden_states" */
  transformerOutput?: string;
}

const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
const under = (folder: string, files: GraphFiles) =>
  Object.fromEntries(Object.entries(files).map(([name, data]) => [`${folder}/${name}`, data]));

/** The scheduler settings of FLUX.1-dev and FLUX.1-schnell (diffusers' scheduler_config.json). */
export function schedulerConfig(variant: TinyVariant) {
  return {
    _class_name: "FlowMatchEulerDiscreteScheduler",
    base_image_seq_len: 256,
    base_shift: 0.5,
    max_image_seq_len: 4096,
    max_shift: 1.15,
    num_train_timesteps: 1000,
    shift: variant === "dev" ? 3.0 : 1.0,
    use_dynamic_shifting: variant === "dev",
  };
}

/**
 * Writes a tiny FLUX-style pipeline with random weights into `dir`, in the diffusers ONNX layout
 * (model_index.json, scheduler/, tokenizer/, tokenizer_2/, text_encoder/, text_encoder_2/,
 * transformer/, vae_decoder/) with the real file names and input/output names. The weights come
 * from `seed`, so the same call writes the same bytes. Its images are noise.
 */
export async function makeTinyFlux(dir: string, options: TinyFluxOptions = {}): Promise<void> {
  const variant = options.variant ?? "dev";
  const precision = {
    weights: options.precision ?? "fp32",
    io: options.io ?? options.precision ?? "fp32",
    externalData: options.externalData,
  } as const;
  const transformerFolder = options.transformerFolder ?? "transformer";
  const rng = new SeededRandom(options.seed ?? 1);
  const clipTok = clipTokenizerFiles(77);
  const t5Tok = t5TokenizerFiles(variant === "dev" ? 512 : 256);
  const sizes: TinySizes = {
    clipVocab: clipTok.vocabSize,
    clipHidden: 32,
    clipPositions: 77,
    t5Vocab: t5Tok.vocabSize,
    t5Hidden: 32,
    inner: 16,
    latentChannels: 16,
    guidanceEmbeds: variant === "dev",
  };
  const files: Record<string, string | Uint8Array> = {
    "model_index.json": json({
      _class_name: "FluxPipeline",
      _diffusers_version: "0.32.0",
      _spool_tiny_model: {
        variant,
        seed: options.seed ?? 1,
        precision: precision.weights,
        io: precision.io,
        note: "random weights: generates noise",
      },
      scheduler: ["diffusers", "FlowMatchEulerDiscreteScheduler"],
      text_encoder: ["transformers", "CLIPTextModel"],
      text_encoder_2: ["transformers", "T5EncoderModel"],
      tokenizer: ["transformers", "CLIPTokenizer"],
      tokenizer_2: ["transformers", "T5TokenizerFast"],
      transformer: ["diffusers", "FluxTransformer2DModel"],
      vae: ["diffusers", "AutoencoderKL"],
    }),
    "scheduler/scheduler_config.json": json(schedulerConfig(variant)),
    "text_encoder/config.json": json({
      architectures: ["CLIPTextModel"],
      model_type: "clip_text_model",
      hidden_size: sizes.clipHidden,
      intermediate_size: 2 * sizes.clipHidden,
      max_position_embeddings: sizes.clipPositions,
      num_attention_heads: 1,
      num_hidden_layers: 1,
      projection_dim: sizes.clipHidden,
      vocab_size: sizes.clipVocab,
      bos_token_id: sizes.clipVocab - 2,
      eos_token_id: sizes.clipVocab - 1,
    }),
    ...under("text_encoder", clipTextEncoder(sizes, rng, precision)),
    "text_encoder_2/config.json": json({
      architectures: ["T5EncoderModel"],
      model_type: "t5",
      d_model: sizes.t5Hidden,
      d_ff: 2 * sizes.t5Hidden,
      d_kv: sizes.t5Hidden,
      num_heads: 1,
      num_layers: 1,
      vocab_size: sizes.t5Vocab,
      pad_token_id: 0,
      eos_token_id: 1,
    }),
    ...under("text_encoder_2", t5Encoder(sizes, rng, precision)),
    [`${transformerFolder}/config.json`]: json({
      _class_name: "FluxTransformer2DModel",
      attention_head_dim: sizes.inner,
      guidance_embeds: sizes.guidanceEmbeds,
      in_channels: sizes.latentChannels * 4,
      joint_attention_dim: sizes.t5Hidden,
      num_attention_heads: 1,
      num_layers: 1,
      num_single_layers: 0,
      patch_size: 1,
      pooled_projection_dim: sizes.clipHidden,
    }),
    ...under(transformerFolder, fluxTransformer(sizes, rng, precision, options.transformerOutput)),
    "vae_decoder/config.json": json({
      _class_name: "AutoencoderKL",
      in_channels: 3,
      out_channels: 3,
      latent_channels: sizes.latentChannels,
      block_out_channels: [16],
      scaling_factor: 0.3611,
      shift_factor: 0.1159,
    }),
    ...under("vae_decoder", vaeDecoder(sizes, rng, precision)),
  };
  for (const [name, text] of Object.entries(clipTok.files)) {
    // optimum's export saves the slow CLIP tokenizer: vocab.json + merges.txt, no tokenizer.json
    if (options.clipTokenizer === "vocab-merges" && name === "tokenizer.json") continue;
    files[`tokenizer/${name}`] = text;
  }
  for (const [name, text] of Object.entries(t5Tok.files)) files[`tokenizer_2/${name}`] = text;
  for (const [name, data] of Object.entries(files)) {
    const path = join(dir, name);
    await mkdir(join(path, ".."), { recursive: true });
    await writeFile(path, data);
  }
}
