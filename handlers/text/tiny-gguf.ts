import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * A tiny llama-architecture GGUF (v3) with random weights: 2 layers, n_embd 64, a byte-level
 * BPE vocabulary of 266 tokens. It loads and generates in llama.cpp like any real model, in a
 * few milliseconds per token, so tests and the demo endpoint run the real inference code on any
 * machine. Its text is babble: the weights are random (biased towards printable ASCII).
 */
export interface TinyGgufOptions {
  /** Seed of the weights; the same seed writes the same bytes. @default 1 */
  seed?: number;
  /** @default 2048 */
  contextLength?: number;
  /** Name in general.name. @default "spool-tiny-demo" */
  name?: string;
  /** Metadata keys to leave out: tests make broken files with it. */
  omitKeys?: string[];
}

const N_EMBD = 64;
const N_LAYER = 2;
const N_HEAD = 4;
const N_HEAD_KV = 4;
const N_FF = 128;
const ALIGNMENT = 32;

// GGUF metadata value types.
const T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;
const GGML_F32 = 0;

/** GPT-2's byte-to-unicode table: every byte is a printable character in the vocabulary. */
function byteTokens(): string[] {
  const direct = new Set<number>();
  for (let b = 33; b <= 126; b++) direct.add(b);
  for (let b = 161; b <= 172; b++) direct.add(b);
  for (let b = 174; b <= 255; b++) direct.add(b);
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(direct.has(b) ? b : 256 + extra++));
  return out;
}

/** Merged tokens on top of the 256 bytes ("Ġ" is the byte-level space). */
const MERGES: [string, string][] = [
  ["Ġ", "t"],
  ["h", "e"],
  ["i", "n"],
  ["e", "r"],
  ["a", "n"],
  ["o", "n"],
  ["Ġt", "he"],
];
const SPECIALS = ["<s>", "</s>", "<unk>"];

/** The vocabulary: 256 byte tokens, 7 merges, then <s>, </s>, <unk> (266 in all). */
export function tinyVocabulary(): { tokens: string[]; merges: string[]; types: number[]; bos: number; eos: number } {
  const tokens = [...byteTokens(), ...MERGES.map(([a, b]) => a + b), ...SPECIALS];
  const types = tokens.map((_, i) => (i >= tokens.length - SPECIALS.length ? 3 : 1)); // 1 normal, 3 control
  return { tokens, merges: MERGES.map(([a, b]) => `${a} ${b}`), types, bos: tokens.length - 3, eos: tokens.length - 2 };
}

/** mulberry32: small, fast, seedable. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Writer {
  readonly #parts: Uint8Array[] = [];
  #size = 0;
  readonly #enc = new TextEncoder();

  get size(): number {
    return this.#size;
  }
  bytes(b: Uint8Array): void {
    this.#parts.push(b);
    this.#size += b.length;
  }
  #num(width: number, set: (v: DataView) => void): void {
    const b = new Uint8Array(width);
    set(new DataView(b.buffer));
    this.bytes(b);
  }
  u32(n: number): void {
    this.#num(4, (v) => v.setUint32(0, n, true));
  }
  i32(n: number): void {
    this.#num(4, (v) => v.setInt32(0, n, true));
  }
  u64(n: number): void {
    this.#num(8, (v) => v.setBigUint64(0, BigInt(n), true));
  }
  f32(n: number): void {
    this.#num(4, (v) => v.setFloat32(0, n, true));
  }
  string(s: string): void {
    const b = this.#enc.encode(s);
    this.u64(b.length);
    this.bytes(b);
  }
  pad(to: number): void {
    const n = (to - (this.#size % to)) % to;
    if (n) this.bytes(new Uint8Array(n));
  }
  concat(): Uint8Array {
    const out = new Uint8Array(this.#size);
    let at = 0;
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

type Value =
  | { t: "u32" | "i32" | "f32" | "u64"; v: number }
  | { t: "bool"; v: boolean }
  | { t: "string"; v: string }
  | { t: "strings"; v: string[] }
  | { t: "i32s"; v: number[] };

function writeKv(w: Writer, key: string, value: Value): void {
  w.string(key);
  switch (value.t) {
    case "strings":
      w.u32(T.array);
      w.u32(T.string);
      w.u64(value.v.length);
      for (const s of value.v) w.string(s);
      return;
    case "i32s":
      w.u32(T.array);
      w.u32(T.i32);
      w.u64(value.v.length);
      for (const n of value.v) w.i32(n);
      return;
    case "bool":
      w.u32(T.bool);
      w.bytes(new Uint8Array([value.v ? 1 : 0]));
      return;
    case "string":
      w.u32(T.string);
      w.string(value.v);
      return;
    default:
      w.u32(T[value.t]);
      w[value.t](value.v);
  }
}

interface Tensor {
  name: string;
  /** ggml order: dims[0] is the row length. */
  dims: number[];
  data: Float32Array;
}

/** The bytes of a tiny demo GGUF. Takes a few milliseconds. */
export function tinyGguf(options: TinyGgufOptions = {}): Uint8Array {
  const rand = seededRandom(options.seed ?? 1);
  const vocab = tinyVocabulary();
  const nVocab = vocab.tokens.length;
  const headDim = N_EMBD / N_HEAD;
  const nEmbdKv = headDim * N_HEAD_KV;

  const randomTensor = (name: string, dims: number[], scale: number): Tensor => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = (rand() * 2 - 1) * scale;
    return { name, dims, data };
  };
  const ones = (name: string): Tensor => ({ name, dims: [N_EMBD], data: new Float32Array(N_EMBD).fill(1) });
  /** Rows that write into the residual stream leave dimension 0 alone (see below). */
  const sparingDim0 = (t: Tensor): Tensor => {
    t.data.fill(0, 0, t.dims[0]!);
    return t;
  };

  // Dimension 0 of every embedding is a constant that no layer changes; the output matrix reads
  // it as a bias that favours printable ASCII and never picks </s>, so the demo babbles
  // readable text up to max_tokens.
  const embd = randomTensor("token_embd.weight", [N_EMBD, nVocab], 0.5);
  for (let t = 0; t < nVocab; t++) embd.data[t * N_EMBD] = 1;
  const output = randomTensor("output.weight", [N_EMBD, nVocab], 0.15);
  for (let t = 0; t < nVocab; t++) {
    const printable = (t >= 0x61 && t <= 0x7a) || t === 0x20 || (t >= 256 && t < 256 + MERGES.length);
    output.data[t * N_EMBD] = t === vocab.eos ? -50 : printable ? 4 : -4;
  }
  const tensors: Tensor[] = [embd, ones("output_norm.weight"), output];
  for (let i = 0; i < N_LAYER; i++) {
    const p = `blk.${i}.`;
    tensors.push(
      ones(`${p}attn_norm.weight`),
      randomTensor(`${p}attn_q.weight`, [N_EMBD, N_EMBD], 0.3),
      randomTensor(`${p}attn_k.weight`, [N_EMBD, nEmbdKv], 0.3),
      randomTensor(`${p}attn_v.weight`, [N_EMBD, nEmbdKv], 0.3),
      sparingDim0(randomTensor(`${p}attn_output.weight`, [N_EMBD, N_EMBD], 0.1)),
      ones(`${p}ffn_norm.weight`),
      randomTensor(`${p}ffn_gate.weight`, [N_EMBD, N_FF], 0.3),
      sparingDim0(randomTensor(`${p}ffn_down.weight`, [N_FF, N_EMBD], 0.1)),
      randomTensor(`${p}ffn_up.weight`, [N_EMBD, N_FF], 0.3),
    );
  }

  const all: [string, Value][] = [
    ["general.architecture", { t: "string", v: "llama" }],
    ["general.name", { t: "string", v: options.name ?? "spool-tiny-demo" }],
    ["general.alignment", { t: "u32", v: ALIGNMENT }],
    ["general.file_type", { t: "u32", v: 0 }], // all F32
    ["llama.context_length", { t: "u32", v: options.contextLength ?? 2048 }],
    ["llama.embedding_length", { t: "u32", v: N_EMBD }],
    ["llama.block_count", { t: "u32", v: N_LAYER }],
    ["llama.feed_forward_length", { t: "u32", v: N_FF }],
    ["llama.attention.head_count", { t: "u32", v: N_HEAD }],
    ["llama.attention.head_count_kv", { t: "u32", v: N_HEAD_KV }],
    ["llama.attention.layer_norm_rms_epsilon", { t: "f32", v: 1e-5 }],
    ["llama.rope.dimension_count", { t: "u32", v: headDim }],
    ["llama.rope.freq_base", { t: "f32", v: 10000 }],
    ["llama.vocab_size", { t: "u32", v: nVocab }],
    ["tokenizer.ggml.model", { t: "string", v: "gpt2" }],
    ["tokenizer.ggml.pre", { t: "string", v: "default" }],
    ["tokenizer.ggml.tokens", { t: "strings", v: vocab.tokens }],
    ["tokenizer.ggml.token_type", { t: "i32s", v: vocab.types }],
    ["tokenizer.ggml.merges", { t: "strings", v: vocab.merges }],
    ["tokenizer.ggml.bos_token_id", { t: "u32", v: vocab.bos }],
    ["tokenizer.ggml.eos_token_id", { t: "u32", v: vocab.eos }],
    ["tokenizer.ggml.unknown_token_id", { t: "u32", v: vocab.eos + 1 }],
    ["tokenizer.ggml.add_bos_token", { t: "bool", v: true }],
  ];
  const kv = all.filter(([key]) => !options.omitKeys?.includes(key));

  const w = new Writer();
  w.bytes(new TextEncoder().encode("GGUF"));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(kv.length);
  for (const [key, value] of kv) writeKv(w, key, value);
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_F32);
    w.u64(offset);
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  w.pad(ALIGNMENT);
  for (const t of tensors) {
    w.bytes(new Uint8Array(t.data.buffer));
    w.pad(ALIGNMENT);
  }
  return w.concat();
}

/** Writes a tiny demo GGUF to `path` (atomically: other processes never see half a file). */
export function writeTinyGguf(path: string, options: TinyGgufOptions = {}): string {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, tinyGguf(options));
  renameSync(tmp, path);
  return path;
}
