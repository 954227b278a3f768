import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type * as ort from "onnxruntime-node";
import type { ModelLayout } from "./model-layout.ts";
import { clipTokenizerJson } from "./clip-tokenizer-json.ts";
import { ModelFormatError, OnnxComponent, type Port } from "./onnx-component.ts";

type Transformers = typeof import("@huggingface/transformers");
type Tokenizer = InstanceType<Transformers["PreTrainedTokenizer"]>;

/** What the transformer is conditioned on (fp32 on the host): T5 states per token and the pooled CLIP state. */
export interface TextEmbedding {
  /** [1, t5Length, t5Hidden] */
  t5: { data: Float32Array; dims: readonly number[] };
  /** [1, clipHidden] */
  pooled: { data: Float32Array; dims: readonly number[] };
}

const CLIP_LENGTH = 77;

/**
 * The two text encoders of a FLUX pipeline: tokenizer/ + text_encoder/ (CLIP, pooled output) and
 * tokenizer_2/ + text_encoder_2/ (T5). Tokenizers come from @huggingface/transformers (local files
 * only); the graphs run as OnnxComponents, so fp16 encoders work like fp32 ones.
 */
export class TextEncoders {
  private constructor(
    private readonly clipTokenizer: Tokenizer,
    private readonly clip: OnnxComponent,
    private readonly pooledOut: Port,
    private readonly t5Tokenizer: Tokenizer,
    private readonly t5: OnnxComponent,
    private readonly t5Out: Port,
    private readonly t5Length: number,
  ) {}

  static async load(layout: ModelLayout, sessionOptions: ort.InferenceSession.SessionOptions, t5Length: number): Promise<TextEncoders> {
    const [clipTokenizer, t5Tokenizer, clip, t5] = await Promise.all([
      loadClipTokenizer(layout.clipTokenizer),
      loadTokenizer(layout.t5Tokenizer, "T5"),
      OnnxComponent.load(layout.root, layout.textEncoder, sessionOptions),
      OnnxComponent.load(layout.root, layout.textEncoder2, sessionOptions),
    ]);
    try {
      clip.input("input_ids");
      t5.input("input_ids");
      return new TextEncoders(
        clipTokenizer,
        clip,
        clip.requireFloat(clip.output("pooler_output")),
        t5Tokenizer,
        t5,
        t5.requireFloat(t5.output("last_hidden_state")),
        t5Length,
      );
    } catch (err) {
      await Promise.all([clip.release(), t5.release()]);
      throw err;
    }
  }

  /** The element types of the encoders' outputs. */
  get precisions(): Record<string, string> {
    return { text_encoder: this.pooledOut.type, text_encoder_2: this.t5Out.type };
  }

  async encode(prompt: string): Promise<TextEmbedding> {
    const ids = (tokenizer: Tokenizer, length: number) => {
      const t = tokenizer(prompt, { padding: "max_length", max_length: length, truncation: true }).input_ids as {
        data: BigInt64Array;
        dims: number[];
      };
      return { data: t.data, dims: t.dims };
    };
    const feeds = (c: OnnxComponent, input: { data: BigInt64Array; dims: number[] }) => {
      // FLUX's reference pipeline runs both encoders without a mask; exports that declare one get all ones
      const f: Record<string, { data: BigInt64Array; dims: number[] }> = { input_ids: input };
      if (c.inputs.has("attention_mask")) f.attention_mask = { data: new BigInt64Array(input.data.length).fill(1n), dims: input.dims };
      return f;
    };
    const [[pooled], [t5]] = await Promise.all([
      this.clip.run(feeds(this.clip, ids(this.clipTokenizer, CLIP_LENGTH)), [this.pooledOut]),
      this.t5.run(feeds(this.t5, ids(this.t5Tokenizer, this.t5Length)), [this.t5Out]),
    ]);
    return { pooled: pooled!, t5: t5! };
  }

  async dispose(): Promise<void> {
    await Promise.all([this.clip.release(), this.t5.release()]);
  }
}

async function loadTokenizer(dir: string, what: string): Promise<Tokenizer> {
  const hf = await import("@huggingface/transformers");
  const json = JSON.parse(await readFile(join(dir, "tokenizer.json"), "utf8"));
  const config = await readOptionalJson(join(dir, "tokenizer_config.json"));
  try {
    return new hf.PreTrainedTokenizer(json, config);
  } catch (err) {
    throw new ModelFormatError(`${what} tokenizer ${dir}/tokenizer.json cannot be read: ${(err as Error).message}`, { cause: err });
  }
}

/** CLIP's tokenizer, from tokenizer.json or built at load from the slow tokenizer's vocab.json + merges.txt. */
async function loadClipTokenizer(source: { dir: string; fromFiles: boolean }): Promise<Tokenizer> {
  if (!source.fromFiles) return loadTokenizer(source.dir, "CLIP");
  const hf = await import("@huggingface/transformers");
  const vocab = JSON.parse(await readFile(join(source.dir, "vocab.json"), "utf8")) as Record<string, number>;
  const merges = (await readFile(join(source.dir, "merges.txt"), "utf8")).split("\n").filter((l) => l.trim() && !l.startsWith("#version"));
  const config = {
    ...CLIP_SPECIALS,
    model_max_length: CLIP_LENGTH,
    do_lower_case: true,
    ...(await readOptionalJson(join(source.dir, "tokenizer_config.json"))),
  };
  const json = clipTokenizerJson(vocab, merges, config.bos_token, config.eos_token, config.unk_token);
  return new hf.PreTrainedTokenizer(json, config);
}

const CLIP_SPECIALS = { bos_token: "<|startoftext|>", eos_token: "<|endoftext|>", pad_token: "<|endoftext|>", unk_token: "<|endoftext|>" };

async function readOptionalJson(path: string): Promise<Record<string, unknown>> {
  try {
    const parsed = JSON.parse(await readFile(path, "utf8"));
    // slow tokenizers' configs name specials as objects ({content: "..."}); the fast form takes strings
    for (const [k, v] of Object.entries(parsed))
      if (v && typeof v === "object" && "content" in v) parsed[k] = (v as { content: string }).content;
    return parsed;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw err;
  }
}
