import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ModelFormatError } from "./onnx-component.ts";

/** The folders of a diffusers/optimum-style FLUX ONNX export that the pipeline may read. */
export const MODEL_FOLDERS = [
  "scheduler",
  "tokenizer",
  "tokenizer_2",
  "text_encoder",
  "text_encoder_2",
  "transformer",
  "unet",
  "vae_decoder",
] as const;

/** What the pipeline supports, for error messages. */
export const SUPPORTED_LAYOUT =
  "a diffusers/optimum ONNX export: scheduler/scheduler_config.json; tokenizer/ with tokenizer.json or vocab.json + merges.txt (CLIP); " +
  "tokenizer_2/tokenizer.json (T5 fast tokenizer); text_encoder/, text_encoder_2/, transformer/ (or unet/) and vae_decoder/ each with model.onnx " +
  "(weights inside it or beside it as model.onnx_data or model.onnx.data), float32 or float16 inputs and outputs";

/** Where each part of a FLUX ONNX folder is, once the folder has been checked. */
export interface ModelLayout {
  root: string;
  scheduler: string;
  /** CLIP tokenizer folder; `fromFiles` when it has vocab.json + merges.txt but no tokenizer.json. */
  clipTokenizer: { dir: string; fromFiles: boolean };
  t5Tokenizer: string;
  textEncoder: string;
  textEncoder2: string;
  /** transformer/model.onnx or unet/model.onnx. */
  transformer: string;
  vaeDecoder: string;
  /** Optional config.json files (defaults apply without them). */
  transformerConfig?: string;
  vaeConfig?: string;
}

/**
 * Checks a model folder and says where each part is; throws a ModelFormatError naming every
 * missing or unsupported file and what is supported.
 */
export function resolveLayout(root: string): ModelLayout {
  const problems: string[] = [];
  const has = (rel: string) => existsSync(join(root, rel));
  if (has("transformer.opt") || has("transformer.opt/bf16")) {
    throw new ModelFormatError(
      `model folder ${root}: transformer.opt/ is a TensorRT-oriented export (Black Forest Labs' FLUX.1-*-onnx: engine-specific graphs, fp8/fp4 TensorRT-only ops) and is not supported; supported: ${SUPPORTED_LAYOUT}. The README's "Real FLUX weights" recipe makes one from the diffusers weights.`,
    );
  }
  const graph = (folder: string): string => {
    const path = join(root, folder, "model.onnx");
    if (existsSync(path)) return path;
    const others = existsSync(join(root, folder)) ? readdirSync(join(root, folder)).filter((f) => f.endsWith(".onnx")) : [];
    problems.push(
      others.length
        ? `${folder}/model.onnx missing (found ${others.join(", ")}; the graph must be named model.onnx)`
        : `${folder}/model.onnx missing`,
    );
    return path;
  };
  const transformerFolder = has("transformer/model.onnx") || !has("unet/model.onnx") ? "transformer" : "unet";
  if (!has("scheduler/scheduler_config.json")) problems.push("scheduler/scheduler_config.json missing");
  const clipJson = has("tokenizer/tokenizer.json");
  if (!clipJson && !(has("tokenizer/vocab.json") && has("tokenizer/merges.txt")))
    problems.push("tokenizer/ needs tokenizer.json, or vocab.json and merges.txt (CLIP BPE)");
  if (!has("tokenizer_2/tokenizer.json")) {
    problems.push(
      has("tokenizer_2/spiece.model")
        ? "tokenizer_2/tokenizer.json missing (only spiece.model: save the T5 tokenizer as a fast tokenizer, T5TokenizerFast.save_pretrained)"
        : "tokenizer_2/tokenizer.json missing",
    );
  }
  const layout: ModelLayout = {
    root,
    scheduler: join(root, "scheduler/scheduler_config.json"),
    clipTokenizer: { dir: join(root, "tokenizer"), fromFiles: !clipJson },
    t5Tokenizer: join(root, "tokenizer_2"),
    textEncoder: graph("text_encoder"),
    textEncoder2: graph("text_encoder_2"),
    transformer: graph(transformerFolder),
    vaeDecoder: graph("vae_decoder"),
    transformerConfig: has(`${transformerFolder}/config.json`) ? join(root, transformerFolder, "config.json") : undefined,
    vaeConfig: has("vae_decoder/config.json") ? join(root, "vae_decoder/config.json") : undefined,
  };
  if (problems.length)
    throw new ModelFormatError(
      `model folder ${root} is not a FLUX ONNX export this pipeline runs: ${problems.join("; ")}. Supported: ${SUPPORTED_LAYOUT}`,
    );
  return layout;
}
