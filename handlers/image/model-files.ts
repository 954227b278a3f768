import { existsSync } from "node:fs";
import { join } from "node:path";

/** The folders of a diffusers-style FLUX ONNX export that the pipeline reads. */
export const MODEL_FOLDERS = ["scheduler", "tokenizer", "tokenizer_2", "text_encoder", "text_encoder_2", "transformer", "vae_decoder"] as const;

/** Files the pipeline cannot run without. */
export const REQUIRED_FILES = [
  "scheduler/scheduler_config.json",
  "tokenizer/tokenizer.json",
  "tokenizer/tokenizer_config.json",
  "tokenizer_2/tokenizer.json",
  "tokenizer_2/tokenizer_config.json",
  "text_encoder/config.json",
  "text_encoder/model.onnx",
  "text_encoder_2/config.json",
  "text_encoder_2/model.onnx",
  "transformer/config.json",
  "transformer/model.onnx",
  "vae_decoder/config.json",
  "vae_decoder/model.onnx",
] as const;

/** The required files that `root` lacks. */
export function missingFiles(root: string): string[] {
  return REQUIRED_FILES.filter((f) => !existsSync(join(root, f)));
}
