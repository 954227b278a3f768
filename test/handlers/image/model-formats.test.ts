import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onnx } from "onnx-proto";
import { FluxPipeline, type GenerateRequest } from "../../../handlers/image/pipeline.ts";
import { makeTinyFlux, type TinyFluxOptions } from "../../../handlers/image/tiny-model/make-tiny-flux.ts";

const dir = mkdtempSync(join(tmpdir(), "spool-flux-formats-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const request: GenerateRequest = { prompt: "a red cat", width: 256, height: 256, steps: 4, guidance: 3.5, seed: 7 };
let fp32Image: Uint8Array;

async function make(name: string, options: TinyFluxOptions = {}): Promise<string> {
  const root = join(dir, name);
  await makeTinyFlux(root, { variant: "dev", ...options });
  return root;
}

async function imageOf(root: string, req = request): Promise<{ image: Uint8Array; precisions: Record<string, string> }> {
  const pipeline = await FluxPipeline.load(root, { device: "cpu", maxSequenceLength: 512 });
  try {
    return { image: await pipeline.generate(req), precisions: pipeline.precisions };
  } finally {
    await pipeline.dispose();
  }
}

/**
 * The tolerance an fp16 image keeps to its fp32 twin (8-bit RGB, 0..255): mean |difference| below
 * 1 level, 99% of values within 8 levels, none beyond 32. Measured on the tiny dev model at
 * 256x256, 4 steps: max 12 / mean 0.42 (with true CFG at 4: max 19 / mean 0.59); 28 steps: max 4.
 */
function expectClose(a: Uint8Array, b: Uint8Array) {
  expect(a.length).toBe(b.length);
  let sum = 0;
  let max = 0;
  let within = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    sum += d;
    max = Math.max(max, d);
    if (d <= 8) within++;
  }
  expect({ meanBelow1: sum / a.length < 1, within8: within / a.length >= 0.99, maxAtMost32: max <= 32 }).toEqual({
    meanBelow1: true,
    within8: true,
    maxAtMost32: true,
  });
}

beforeAll(async () => {
  fp32Image = (await imageOf(await make("fp32"))).image;
});

describe("precision", () => {
  test("an fp16 model with fp16 inputs and outputs loads and gives its fp32 twin's image within tolerance", async () => {
    const { image, precisions } = await imageOf(await make("fp16", { precision: "fp16" }));
    expect(precisions).toEqual({ transformer: "float16", vae_decoder: "float16", text_encoder: "float16", text_encoder_2: "float16" });
    expect(Buffer.from(image).equals(Buffer.from(fp32Image))).toBe(false); // it really ran in fp16
    expectClose(image, fp32Image);
  });

  test("fp16 weights with fp32 inputs and outputs (ONNX Runtime's fp16 optimizer, keep_io_types) match too", async () => {
    const root = await make("fp16-io32", { precision: "fp16", io: "fp32" });
    const { image, precisions } = await imageOf(root);
    expect(precisions).toEqual({ transformer: "float32", vae_decoder: "float32", text_encoder: "float32", text_encoder_2: "float32" });
    expect(weightTypes(join(root, "transformer/model.onnx"))).toEqual(["float16"]);
    expect(weightTypes(join(dir, "fp32/transformer/model.onnx"))).toEqual(["float32"]);
    expectClose(image, fp32Image);
  });

  test("components may mix precisions: an fp16 transformer among fp32 encoders and VAE", async () => {
    const mixed = join(dir, "mixed");
    cpSync(join(dir, "fp32"), mixed, { recursive: true });
    rmSync(join(mixed, "transformer"), { recursive: true });
    cpSync(join(dir, "fp16/transformer"), join(mixed, "transformer"), { recursive: true });
    const { image, precisions } = await imageOf(mixed);
    expect(precisions).toEqual({ transformer: "float16", vae_decoder: "float32", text_encoder: "float32", text_encoder_2: "float32" });
    expectClose(image, fp32Image);
  });

  test("the tensors constant for a job (text embeddings, ids, guidance) are converted to fp16 once per job, not once per step", async () => {
    const pipeline = await FluxPipeline.load(await make("fp16-constant", { precision: "fp16" }), { device: "cpu", maxSequenceLength: 512 });
    try {
      // The real graph runs; each call's arguments are kept.
      const calls: { feeds: string[]; fixed: Record<string, { type: string }> }[] = [];
      const run = pipeline.transformer.run.bind(pipeline.transformer);
      pipeline.transformer.run = (feeds, wanted, fixed = {}) => (
        calls.push({ feeds: Object.keys(feeds).sort(), fixed }), run(feeds, wanted, fixed)
      );
      await pipeline.generate(request);
      await pipeline.generate({ ...request, prompt: "a blue dog" });
      expect(calls.map((c) => c.feeds)).toEqual(Array(2 * request.steps).fill(["hidden_states", "timestep"]));
      const [first, second] = [calls[0]!.fixed, calls[request.steps]!.fixed];
      expect(
        calls.slice(0, request.steps).every((c) => c.fixed === first) && calls.slice(request.steps).every((c) => c.fixed === second),
      ).toBe(true);
      expect(first === second).toBe(false);
      expect(Object.fromEntries(Object.entries(first).map(([name, t]) => [name, t.type]))).toEqual({
        encoder_hidden_states: "float16",
        pooled_projections: "float16",
        img_ids: "float16",
        txt_ids: "float16",
        guidance: "float16",
      });
    } finally {
      await pipeline.dispose();
    }
  });

  test("true CFG with a negative prompt runs on fp16 too (batch of two through fp16 boundaries)", async () => {
    const cfg = { ...request, negativePrompt: "blurry", trueCfgScale: 4 };
    const [a, b] = await Promise.all([imageOf(join(dir, "fp32"), cfg), imageOf(join(dir, "fp16"), cfg)]);
    expect(Buffer.from(a.image).equals(Buffer.from(fp32Image))).toBe(false);
    expectClose(b.image, a.image);
  });
});

describe("layouts real exports use", () => {
  test("unet/ as the transformer folder, weights in model.onnx.data, CLIP tokenizer as vocab.json + merges.txt: the same image", async () => {
    const root = await make("community", { transformerFolder: "unet", externalData: "model.onnx.data", clipTokenizer: "vocab-merges" });
    expect(readdirSync(join(root, "unet")).sort()).toEqual(["config.json", "model.onnx", "model.onnx.data"]);
    expect(readdirSync(join(root, "tokenizer"))).not.toContain("tokenizer.json");
    expect(Buffer.from((await imageOf(root)).image).equals(Buffer.from(fp32Image))).toBe(true);
  });

  test("config.json files are optional: without them FLUX's defaults give the same image", async () => {
    const root = join(dir, "no-configs");
    cpSync(join(dir, "fp32"), root, { recursive: true });
    for (const folder of ["text_encoder", "text_encoder_2", "transformer", "vae_decoder"]) rmSync(join(root, folder, "config.json"));
    expect(Buffer.from((await imageOf(root)).image).equals(Buffer.from(fp32Image))).toBe(true);
  });

  test("optimum's layout: model.onnx + model.onnx_data, fp16 with another output name: loads by metadata, no fixed names", async () => {
    const root = await make("optimum", { externalData: "model.onnx_data", precision: "fp16", transformerOutput: "latent" });
    expect(statSync(join(root, "transformer/model.onnx_data")).size).toBeGreaterThan(statSync(join(root, "transformer/model.onnx")).size);
    expectClose((await imageOf(root)).image, fp32Image);
  });
});

describe("unsupported folders fail at load, naming the file and what is supported", () => {
  const copy = (name: string) => {
    const root = join(dir, name);
    cpSync(join(dir, "fp32"), root, { recursive: true });
    return root;
  };
  const loadError = (root: string) =>
    FluxPipeline.load(root, { device: "cpu", maxSequenceLength: 512 }).then(
      () => "loaded",
      (e: Error) => `${e.name}: ${e.message}`,
    );

  test("a missing transformer and T5 tokenizer are both named", async () => {
    const root = copy("missing");
    rmSync(join(root, "transformer"), { recursive: true });
    rmSync(join(root, "tokenizer_2/tokenizer.json"));
    writeFileSync(join(root, "tokenizer_2/spiece.model"), "");
    const message = await loadError(root);
    expect(message).toStartWith(`ModelFormatError: model folder ${root} is not a FLUX ONNX export this pipeline runs: `);
    expect(message).toContain("transformer/model.onnx missing");
    expect(message).toContain("tokenizer_2/tokenizer.json missing (only spiece.model: save the T5 tokenizer as a fast tokenizer");
    expect(message).toContain("Supported: a diffusers/optimum ONNX export");
  });

  test("a graph under another name is named with the name it must have", async () => {
    const root = copy("renamed");
    renameSync(join(root, "vae_decoder/model.onnx"), join(root, "vae_decoder/model_fp16.onnx"));
    expect(await loadError(root)).toContain("vae_decoder/model.onnx missing (found model_fp16.onnx; the graph must be named model.onnx)");
  });

  test("Black Forest Labs' TensorRT-oriented layout (transformer.opt/) is refused as such", async () => {
    const root = copy("bfl");
    mkdirSync(join(root, "transformer.opt/bf16"), { recursive: true });
    expect(await loadError(root)).toContain("transformer.opt/ is a TensorRT-oriented export");
  });

  test("a bfloat16 input or output is refused, naming the graph", async () => {
    const root = copy("bf16");
    writeFileSync(join(root, "vae_decoder/model.onnx"), identityGraph(16));
    expect(await loadError(root)).toBe(
      "ModelFormatError: vae_decoder/model.onnx: an input or output is bfloat16, which onnxruntime-node cannot pass in or out; supported at a graph's boundary: float32 and float16 (bf16 inside the graph is fine)",
    );
  });

  test("a float64 output is refused, naming the graph, the value and the supported types", async () => {
    const root = copy("f64");
    writeFileSync(join(root, "vae_decoder/model.onnx"), identityGraph(11));
    expect(await loadError(root)).toBe(
      'ModelFormatError: vae_decoder/model.onnx: "latent_sample" is float64; supported: float32 or float16',
    );
  });
});

/** The element types of a graph's float weights. */
function weightTypes(path: string): string[] {
  const names: Record<number, string> = { 1: "float32", 10: "float16" };
  const { graph } = onnx.ModelProto.decode(readFileSync(path));
  return [
    ...new Set(
      graph!
        .initializer!.filter((t) => t.dataType === 1 || t.dataType === 10)
        .filter((t) => t.dims!.length > 1 && t.dims!.every((d) => Number(d) > 1))
        .map((t) => names[t.dataType!]!),
    ),
  ];
}

/** A one-node graph latent_sample -> sample of one element type. */
function identityGraph(elemType: number): Uint8Array {
  const info = (name: string) => ({ name, type: { tensorType: { elemType, shape: { dim: [{ dimParam: "n" }] } } } });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: "", version: 18 }],
    graph: {
      name: "g",
      node: [{ opType: "Identity", input: ["latent_sample"], output: ["sample"] }],
      input: [info("latent_sample")],
      output: [info("sample")],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}
