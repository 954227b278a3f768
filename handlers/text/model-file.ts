import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { writeTinyGguf } from "./tiny-gguf.ts";

/** File name of the generated demo model under the models folder. */
export const DEMO_MODEL_FILE = "spool-tiny-demo.gguf";

const isHubId = (model: string) => /^(hf:|huggingface:|https?:\/\/)/.test(model);

/**
 * The local path of the model to load: the configured file, a hub id downloaded once into
 * `modelsDir` (with a progress bar on stderr), or the demo model, generated on first use.
 */
export async function resolveModelPath(model: string | undefined, modelsDir: string): Promise<string> {
  if (model === undefined) {
    const path = join(modelsDir, DEMO_MODEL_FILE);
    if (!existsSync(path)) writeTinyGguf(path);
    return path;
  }
  if (!isHubId(model)) {
    const path = resolve(model);
    if (!existsSync(path))
      throw new Error(`model file not found: ${path} (options.model is a local .gguf path or a hub id such as hf:owner/repo/file.gguf)`);
    return path;
  }
  const { resolveModelFile } = await import("node-llama-cpp");
  try {
    return await resolveModelFile(model, { directory: modelsDir, cli: Boolean(process.stderr.isTTY) });
  } catch (err) {
    throw new Error(
      `could not download ${model} into ${modelsDir}: ${(err as Error).message} (no internet? put the .gguf file on this machine and set options.model to its path)`,
      { cause: err },
    );
  }
}

/** Architectures without attention or a feed-forward size, which the checks below skip. */
const RECURRENT = new Set(["mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"]);

/**
 * Checks that a GGUF file has the keys llama.cpp needs before loading it: some missing keys
 * (feed_forward_length, attention.head_count) abort the whole process natively instead of
 * throwing. Returns the architecture.
 */
export async function validateGguf(path: string): Promise<{ architecture: string; contextLength?: number }> {
  const { readGgufFileInfo } = await import("node-llama-cpp");
  let metadata: Record<string, unknown>;
  try {
    metadata = (await readGgufFileInfo(path, { logWarnings: false })).metadata as unknown as Record<string, unknown>;
  } catch (err) {
    throw new Error(`${basename(path)} is not a readable GGUF file: ${(err as Error).message}`, { cause: err });
  }
  const get = (key: string): unknown => key.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], metadata);
  const architecture = get("general.architecture");
  if (typeof architecture !== "string")
    throw new Error(`${basename(path)} is not a usable model: GGUF key general.architecture is missing`);
  const required = [
    `${architecture}.context_length`,
    `${architecture}.embedding_length`,
    `${architecture}.block_count`,
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
  ];
  if (!RECURRENT.has(architecture)) required.push(`${architecture}.feed_forward_length`, `${architecture}.attention.head_count`);
  if (get("tokenizer.ggml.model") === "gpt2") required.push("tokenizer.ggml.merges");
  const missing = required.filter((key) => get(key) === undefined);
  if (missing.length) throw new Error(`${basename(path)} is not a usable model: GGUF keys missing: ${missing.join(", ")}`);
  const contextLength = get(`${architecture}.context_length`);
  return { architecture, contextLength: typeof contextLength === "number" ? contextLength : undefined };
}
