import type { SeededRandom } from "../random.ts";
import { FLOAT, GraphBuilder, INT64, type GraphPrecision } from "./onnx-graph.ts";

/** A graph as files: model.onnx and, with external data, its weights file. */
export type GraphFiles = Record<string, Uint8Array>;

/** Sizes of the tiny model; real FLUX uses 768 (CLIP), 4096 (T5), 3072 (transformer). */
export interface TinySizes {
  clipVocab: number;
  clipHidden: number;
  clipPositions: number;
  t5Vocab: number;
  t5Hidden: number;
  /** Transformer width (one attention head of this size). */
  inner: number;
  latentChannels: number;
  guidanceEmbeds: boolean;
}

/** x @ W (+ b), W drawn with 1/sqrt(fan_in) scale. */
function linear(g: GraphBuilder, rng: SeededRandom, x: string, name: string, inDim: number, outDim: number, bias = true): string {
  const w = g.weight(`${name}.weight`, [inDim, outDim], rng.normals(inDim * outDim, 1 / Math.sqrt(inDim)));
  const y = g.op("MatMul", [x, w]);
  return bias ? g.op("Add", [y, g.weight(`${name}.bias`, [outDim], rng.normals(outDim, 0.02))]) : y;
}

function layerNorm(g: GraphBuilder, x: string, dim: number, name: string): string {
  const gamma = g.weight(`${name}.weight`, [dim], new Float32Array(dim).fill(1));
  const beta = g.weight(`${name}.bias`, [dim], new Float32Array(dim));
  return g.op("LayerNormalization", [x, gamma, beta], { axis: -1, epsilon: 1e-6 });
}

function silu(g: GraphBuilder, x: string): string {
  return g.op("Mul", [x, g.op("Sigmoid", [x])]);
}

/** Sinusoidal embedding of a [batch] float tensor scaled by 1000, as FLUX embeds timesteps: [batch, dim], computed in fp32 as diffusers does. */
function sinusoid(g: GraphBuilder, t: string, dim: number): string {
  const half = dim / 2;
  const freqs = new Float32Array(half).map((_, i) => Math.exp((-Math.log(10000) * i) / half));
  return g.inFp32(t, (t32) => {
    const scaled = g.op("Mul", [g.op("Unsqueeze", [t32, g.ints([1])]), g.weight(g.unique("thousand"), [], new Float32Array([1000]), true)]);
    const args = g.op("Mul", [scaled, g.weight(g.unique("freqs"), [1, half], freqs, true)]);
    return g.op("Concat", [g.op("Cos", [args]), g.op("Sin", [args])], { axis: 1 });
  });
}

/** CLIP text encoder: input_ids -> last_hidden_state, pooler_output (the state at the EOS token, the largest id). */
export function clipTextEncoder(s: TinySizes, rng: SeededRandom, precision: GraphPrecision = {}): GraphFiles {
  const g = new GraphBuilder("clip_text_encoder", precision);
  const ids = g.input("input_ids", INT64, ["batch_size", "sequence_length"]);
  const H = s.clipHidden;
  const tok = g.op("Gather", [g.weight("token_embedding.weight", [s.clipVocab, H], rng.normals(s.clipVocab * H, 0.5)), ids]);
  const seqLen = g.op("Squeeze", [g.op("Shape", [ids], { start: 1, end: 2 }), g.ints([0])]);
  const positions = g.op("Range", [g.ints([0], []), seqLen, g.ints([1], [])]);
  const pos = g.op("Gather", [
    g.weight("position_embedding.weight", [s.clipPositions, H], rng.normals(s.clipPositions * H, 0.1)),
    positions,
  ]);
  let h = g.op("Add", [tok, pos]);
  const n1 = layerNorm(g, h, H, "layer_norm1");
  const up = linear(g, rng, n1, "mlp.fc1", H, 2 * H);
  const act = g.op("Mul", [up, g.op("Sigmoid", [g.op("Mul", [up, g.floats([1.702])])])]); // quick_gelu, as CLIP
  h = g.op("Add", [h, linear(g, rng, act, "mlp.fc2", 2 * H, H)]);
  const last = layerNorm(g, h, H, "final_layer_norm");
  g.result(last, "last_hidden_state", ["batch_size", "sequence_length", H]);
  // pooler_output: the hidden state at each row's EOS token (the largest id in the vocabulary)
  const eos = g.op("Unsqueeze", [g.op("ArgMax", [ids], { axis: 1, keepdims: 1 }), g.ints([2])]);
  const shape = g.op("Concat", [g.op("Shape", [ids], { start: 0, end: 1 }), g.ints([1, H])], { axis: 0 });
  const picked = g.op("GatherElements", [last, g.op("Expand", [eos, shape])], { axis: 1 });
  g.result(g.op("Squeeze", [picked, g.ints([1])]), "pooler_output", ["batch_size", H]);
  return g.files();
}

function rmsNorm(g: GraphBuilder, x: string, dim: number, name: string): string {
  const ms = g.op("ReduceMean", [g.op("Mul", [x, x]), g.ints([-1])], { keepdims: 1 });
  const inv = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [ms, g.floats([1e-6])])])]);
  return g.op("Mul", [g.op("Mul", [x, inv]), g.weight(`${name}.weight`, [dim], new Float32Array(dim).fill(1))]);
}

/** T5 encoder: input_ids -> last_hidden_state. */
export function t5Encoder(s: TinySizes, rng: SeededRandom, precision: GraphPrecision = {}): GraphFiles {
  const g = new GraphBuilder("t5_encoder", precision);
  const ids = g.input("input_ids", INT64, ["batch_size", "encoder_sequence_length"]);
  const D = s.t5Hidden;
  let h = g.op("Gather", [g.weight("shared.weight", [s.t5Vocab, D], rng.normals(s.t5Vocab * D, 0.5)), ids]);
  const n = rmsNorm(g, h, D, "block.0.layer_norm");
  const ff = linear(g, rng, g.op("Relu", [linear(g, rng, n, "block.0.wi", D, 2 * D, false)]), "block.0.wo", 2 * D, D, false);
  h = g.op("Add", [h, ff]);
  g.result(rmsNorm(g, h, D, "final_layer_norm"), "last_hidden_state", ["batch_size", "encoder_sequence_length", D]);
  return g.files();
}

/**
 * FLUX transformer: packed latents and text states in, the velocity of the packed latents out
 * (out_hidden_states). One joint attention block over text + image tokens, conditioned on the
 * timestep, the pooled CLIP state and (dev) the guidance, with position features from the ids.
 */
export function fluxTransformer(
  s: TinySizes,
  rng: SeededRandom,
  precision: GraphPrecision = {},
  outputName = "out_hidden_states",
): GraphFiles {
  const g = new GraphBuilder("flux_transformer", precision);
  const C = s.latentChannels * 4;
  const D = s.inner;
  const hs = g.input("hidden_states", FLOAT, ["batch_size", "packed_height_width", C]);
  const enc = g.input("encoder_hidden_states", FLOAT, ["batch_size", "sequence_length", s.t5Hidden]);
  const pooled = g.input("pooled_projections", FLOAT, ["batch_size", s.clipHidden]);
  const timestep = g.input("timestep", FLOAT, ["batch_size"]);
  const imgIds = g.input("img_ids", FLOAT, ["packed_height_width", 3]);
  const txtIds = g.input("txt_ids", FLOAT, ["sequence_length", 3]);
  const guidance = s.guidanceEmbeds ? g.input("guidance", FLOAT, ["batch_size"]) : undefined;

  const idFeatures = g.weight("pos_embed.weight", [3, D], rng.normals(3 * D, 0.5));
  const x = g.op("Add", [linear(g, rng, hs, "x_embedder", C, D), g.op("Sin", [g.op("MatMul", [imgIds, idFeatures])])]);
  const c = g.op("Add", [linear(g, rng, enc, "context_embedder", s.t5Hidden, D), g.op("Sin", [g.op("MatMul", [txtIds, idFeatures])])]);

  let temb = linear(
    g,
    rng,
    silu(g, linear(g, rng, sinusoid(g, timestep, D), "time_text_embed.timestep_embedder.linear_1", D, D)),
    "time_text_embed.timestep_embedder.linear_2",
    D,
    D,
  );
  if (guidance) {
    const gemb = linear(
      g,
      rng,
      silu(g, linear(g, rng, sinusoid(g, guidance, D), "time_text_embed.guidance_embedder.linear_1", D, D)),
      "time_text_embed.guidance_embedder.linear_2",
      D,
      D,
    );
    temb = g.op("Add", [temb, gemb]);
  }
  temb = g.op("Add", [temb, linear(g, rng, pooled, "time_text_embed.text_embedder", s.clipHidden, D)]);
  const mod = linear(g, rng, silu(g, temb), "norm1.linear", D, 2 * D);
  const [shift, scale] = g.opMulti("Split", [mod, g.ints([D, D])], 2, { axis: 1 }).map((t) => g.op("Unsqueeze", [t, g.ints([1])]));
  const modulate = (t: string) =>
    g.op("Add", [g.op("Mul", [layerNorm(g, t, D, g.unique("norm")), g.op("Add", [scale!, g.floats([1])])]), shift!]);

  let tokens = g.op("Concat", [c, x], { axis: 1 });
  const n = modulate(tokens);
  const q = linear(g, rng, n, "attn.to_q", D, D, false);
  const k = linear(g, rng, n, "attn.to_k", D, D, false);
  const v = linear(g, rng, n, "attn.to_v", D, D, false);
  const scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], { perm: [0, 2, 1] })]), g.floats([1 / Math.sqrt(D)])]);
  const attn = g.op("MatMul", [g.op("Softmax", [scores], { axis: -1 }), v]);
  tokens = g.op("Add", [tokens, linear(g, rng, attn, "attn.to_out", D, D)]);
  const ff = linear(g, rng, silu(g, linear(g, rng, layerNorm(g, tokens, D, "norm2"), "ff.net.0", D, 2 * D)), "ff.net.2", 2 * D, D);
  tokens = g.op("Add", [tokens, ff]);

  const textLen = g.op("Shape", [enc], { start: 1, end: 2 });
  const img = g.op("Slice", [tokens, textLen, g.ints([Number.MAX_SAFE_INTEGER]), g.ints([1])]);
  g.result(linear(g, rng, modulate(img), "proj_out", D, C), outputName, ["batch_size", "packed_height_width", C]);
  return g.files();
}

/** VAE decoder: latent_sample [b, 16, h/8, w/8] -> sample [b, 3, h, w] in [-1, 1]. */
export function vaeDecoder(s: TinySizes, rng: SeededRandom, precision: GraphPrecision = {}): GraphFiles {
  const g = new GraphBuilder("vae_decoder", precision);
  const z = g.input("latent_sample", FLOAT, ["batch_size", s.latentChannels, "latent_height", "latent_width"]);
  const mid = 16;
  const w1 = g.weight(
    "decoder.conv_in.weight",
    [mid, s.latentChannels, 3, 3],
    rng.normals(mid * s.latentChannels * 9, 1 / Math.sqrt(s.latentChannels * 9)),
  );
  const b1 = g.weight("decoder.conv_in.bias", [mid], new Float32Array(mid));
  const h = silu(g, g.op("Conv", [z, w1, b1], { pads: [1, 1, 1, 1], kernel_shape: [3, 3] }));
  const out = 3 * 64;
  const w2 = g.weight("decoder.conv_out.weight", [out, mid, 1, 1], rng.normals(out * mid, 1 / Math.sqrt(mid)));
  const b2 = g.weight("decoder.conv_out.bias", [out], new Float32Array(out));
  const px = g.op("DepthToSpace", [g.op("Conv", [h, w2, b2], { kernel_shape: [1, 1] })], { blocksize: 8, mode: "CRD" });
  g.result(g.op("Tanh", [px]), "sample", ["batch_size", 3, "sample_height", "sample_width"]);
  return g.files();
}
