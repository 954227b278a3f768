import { existsSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import type { Device } from "./options.ts";

type Transformers = typeof import("@huggingface/transformers");
type Tokenizer = Awaited<ReturnType<Transformers["AutoTokenizer"]["from_pretrained"]>>;
type Model = Awaited<ReturnType<Transformers["PreTrainedModel"]["from_pretrained"]>>;

/** What the transformer is conditioned on: T5 states per token and the pooled CLIP state. */
export interface TextEmbedding {
  /** [1, t5Length, t5Hidden] */
  t5: ort.Tensor;
  /** [1, clipHidden] */
  pooled: ort.Tensor;
}

/**
 * The two text encoders of a FLUX pipeline, through @huggingface/transformers from local files
 * only: tokenizer/ + text_encoder/ (CLIP, pooled output) and tokenizer_2/ + text_encoder_2/ (T5).
 */
export class TextEncoders {
  private constructor(
    private readonly clipTokenizer: Tokenizer,
    private readonly clip: Model,
    private readonly t5Tokenizer: Tokenizer,
    private readonly t5: Model,
    private readonly t5Length: number,
  ) {}

  static async load(root: string, device: Device, t5Length: number): Promise<TextEncoders> {
    const hf = await import("@huggingface/transformers");
    hf.env.allowRemoteModels = false;
    hf.env.allowLocalModels = true;
    // Model ids below are absolute paths, joined onto this.
    hf.env.localModelPath = "/";
    const at = (sub: string) => join(root, sub);
    // Real T5-XXL and large CLIP exports keep their weights beside the graph (model.onnx_data).
    const options = (sub: string) =>
      ({ local_files_only: true, subfolder: "", model_file_name: "model", dtype: "fp32", device, use_external_data_format: existsSync(join(root, sub, "model.onnx_data")) }) as const;
    const [clipTokenizer, t5Tokenizer, clip, t5] = await Promise.all([
      hf.AutoTokenizer.from_pretrained(at("tokenizer"), { local_files_only: true }),
      hf.AutoTokenizer.from_pretrained(at("tokenizer_2"), { local_files_only: true }),
      hf.CLIPTextModel.from_pretrained(at("text_encoder"), options("text_encoder")),
      // transformers.js has no T5EncoderModel class; the base class runs an encoder-only graph,
      // and would warn that it "assumes encoder-only", which is what this is.
      quietly(hf, () => hf.PreTrainedModel.from_pretrained(at("text_encoder_2"), options("text_encoder_2"))),
    ]);
    return new TextEncoders(clipTokenizer, clip, t5Tokenizer, t5, t5Length);
  }

  async encode(prompt: string): Promise<TextEmbedding> {
    const clipIds = this.clipTokenizer(prompt, { padding: "max_length", max_length: 77, truncation: true }).input_ids;
    const t5Ids = this.t5Tokenizer(prompt, { padding: "max_length", max_length: this.t5Length, truncation: true }).input_ids;
    const [clipOut, t5Out] = await Promise.all([this.clip({ input_ids: clipIds }), this.t5({ input_ids: t5Ids })]);
    return { pooled: toOrt(clipOut.pooler_output), t5: toOrt(t5Out.last_hidden_state) };
  }

  async dispose(): Promise<void> {
    await Promise.all([this.clip.dispose(), this.t5.dispose()]);
  }
}

function toOrt(t: { data: unknown; dims: number[] }): ort.Tensor {
  return new ort.Tensor("float32", t.data as Float32Array, t.dims);
}

async function quietly<T>(hf: Transformers, load: () => Promise<T>): Promise<T> {
  const level = hf.env.logLevel;
  hf.env.logLevel = hf.LogLevel.ERROR;
  try {
    return await load();
  } finally {
    hf.env.logLevel = level;
  }
}
