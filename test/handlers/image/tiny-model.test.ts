import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { imageIds, imageTokens, unpackLatents } from "../../../handlers/image/latents.ts";
import { resolveLayout } from "../../../handlers/image/model-layout.ts";
import { SeededRandom } from "../../../handlers/image/random.ts";
import { flowMatchSigmas, resolutionShift, SCHEDULER_DEFAULTS } from "../../../handlers/image/scheduler.ts";
import { TextEncoders } from "../../../handlers/image/text-encoders.ts";
import { makeTinyFlux, schedulerConfig } from "../../../handlers/image/tiny-model/make-tiny-flux.ts";
import { makeTinyModels, type TinyModels } from "./tiny-models.ts";

let models: TinyModels;
beforeAll(async () => {
  models = await makeTinyModels();
});
afterAll(() => models.remove());

const io = async (path: string) => {
  const s = await ort.InferenceSession.create(path);
  const names = { inputs: s.inputNames, outputs: s.outputNames };
  await s.release();
  return names;
};

describe("the tiny model generator", () => {
  test("writes the diffusers ONNX layout with the real file names", () => {
    const tree = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? tree(join(dir, e.name)).map((f) => `${e.name}/${f}`) : [e.name],
      );
    expect(tree(models.dev).sort()).toEqual([
      "model_index.json",
      "scheduler/scheduler_config.json",
      "text_encoder/config.json",
      "text_encoder/model.onnx",
      "text_encoder_2/config.json",
      "text_encoder_2/model.onnx",
      "tokenizer/merges.txt",
      "tokenizer/special_tokens_map.json",
      "tokenizer/tokenizer.json",
      "tokenizer/tokenizer_config.json",
      "tokenizer/vocab.json",
      "tokenizer_2/special_tokens_map.json",
      "tokenizer_2/tokenizer.json",
      "tokenizer_2/tokenizer_config.json",
      "transformer/config.json",
      "transformer/model.onnx",
      "vae_decoder/config.json",
      "vae_decoder/model.onnx",
    ]);
    expect(resolveLayout(models.dev).transformer).toBe(join(models.dev, "transformer/model.onnx"));
    expect(JSON.parse(readFileSync(join(models.schnell, "scheduler/scheduler_config.json"), "utf8"))).toEqual(schedulerConfig("schnell"));
  });

  test("graphs have FLUX's input and output names; only dev takes guidance", async () => {
    expect(await io(join(models.dev, "text_encoder/model.onnx"))).toEqual({
      inputs: ["input_ids"],
      outputs: ["last_hidden_state", "pooler_output"],
    });
    expect(await io(join(models.dev, "text_encoder_2/model.onnx"))).toEqual({ inputs: ["input_ids"], outputs: ["last_hidden_state"] });
    const flux = ["hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids", "txt_ids"];
    expect(await io(join(models.dev, "transformer/model.onnx"))).toEqual({ inputs: [...flux, "guidance"], outputs: ["out_hidden_states"] });
    expect(await io(join(models.schnell, "transformer/model.onnx"))).toEqual({ inputs: flux, outputs: ["out_hidden_states"] });
    expect(await io(join(models.dev, "vae_decoder/model.onnx"))).toEqual({ inputs: ["latent_sample"], outputs: ["sample"] });
  });

  test("the transformer maps packed latents [b, tokens, 64] to the same shape; the VAE decodes 8x", async () => {
    const t = await ort.InferenceSession.create(join(models.dev, "transformer/model.onnx"));
    const f = (dims: number[], v = 0.1) => new ort.Tensor("float32", new Float32Array(dims.reduce((a, b) => a * b)).fill(v), dims);
    const out = await t.run({
      hidden_states: f([2, 32, 64]),
      encoder_hidden_states: f([2, 7, 32]),
      pooled_projections: f([2, 32]),
      timestep: f([2], 0.5),
      img_ids: f([32, 3]),
      txt_ids: f([7, 3], 0),
      guidance: f([2], 3.5),
    });
    expect(out.out_hidden_states!.dims).toEqual([2, 32, 64]);
    const vae = await ort.InferenceSession.create(join(models.dev, "vae_decoder/model.onnx"));
    expect((await vae.run({ latent_sample: f([1, 16, 4, 6]) })).sample!.dims).toEqual([1, 3, 32, 48]);
    await Promise.all([t.release(), vae.release()]);
  });

  test("the same seed writes the same bytes", async () => {
    const again = join(models.dir, "again");
    await makeTinyFlux(again, { variant: "dev" });
    for (const f of ["transformer/model.onnx", "text_encoder/model.onnx", "tokenizer_2/tokenizer.json"]) {
      expect(readFileSync(join(again, f)).equals(readFileSync(join(models.dev, f)))).toBe(true);
    }
  });

  test("the text encoders (tokenizers from @huggingface/transformers, graphs on onnxruntime) give FLUX's shapes", async () => {
    const text = await TextEncoders.load(resolveLayout(models.dev), { executionProviders: ["cpu"] }, 512);
    try {
      const a = await text.encode("A photo of a cat; ünïcode ✓");
      expect([a.t5.dims, a.pooled.dims]).toEqual([
        [1, 512, 32],
        [1, 32],
      ]);
      const b = await text.encode("a photo of a dog");
      expect(Buffer.from(a.pooled.data.buffer).equals(Buffer.from(b.pooled.data.buffer))).toBe(false);
      // prompts longer than the T5 length are cut, not refused
      expect((await text.encode("word ".repeat(2000))).t5.dims).toEqual([1, 512, 32]);
    } finally {
      await text.dispose();
    }
  });
});

describe("scheduler and latents", () => {
  test("schnell's schedule is linear from 1 to 1/steps, then 0", () => {
    expect(flowMatchSigmas(4, 4096, { ...SCHEDULER_DEFAULTS, ...schedulerConfig("schnell") })).toEqual([1, 0.75, 0.5, 0.25, 0]);
    expect(flowMatchSigmas(1, 256, { ...SCHEDULER_DEFAULTS, ...schedulerConfig("schnell") })).toEqual([1, 0]);
  });

  test("dev's shift depends on resolution: mu 0.5 at 256 tokens, 1.15 at 4096; bigger images stay noisier longer", () => {
    const dev = { ...SCHEDULER_DEFAULTS, ...schedulerConfig("dev") };
    expect(resolutionShift(256, dev)).toBeCloseTo(0.5, 12);
    expect(resolutionShift(4096, dev)).toBeCloseTo(1.15, 12);
    const small = flowMatchSigmas(28, 256, dev);
    const large = flowMatchSigmas(28, 4096, dev);
    expect([small.length, small[0], small.at(-1), large[0], large.at(-1)]).toEqual([29, 1, 0, 1, 0]);
    // sigma' = e^mu / (e^mu + 1/sigma - 1), at sigma = 0.5: e^mu / (e^mu + 1)
    const at = (mu: number) => Math.exp(mu) / (Math.exp(mu) + 1);
    const half = flowMatchSigmas(2, 4096, dev)[1]!; // linspace(1, 1/2, 2) = [1, 0.5]
    expect(half).toBeCloseTo(at(1.15), 12);
    for (let i = 1; i < 28; i++) expect(large[i]!).toBeGreaterThan(small[i]!);
  });

  test("packing: token (r, c) holds channels x 2x2 patches; ids are (0, row, col)", () => {
    const { rows, cols, count } = imageTokens(64, 32); // 2 x 4 tokens
    expect([rows, cols, count]).toEqual([2, 4, 8]);
    const packed = Float32Array.from({ length: count * 64 }, (_, i) => i);
    const z = unpackLatents(packed, rows, cols, 16);
    // channel 3, latent pixel (y=3, x=5) is token (1, 2), patch (1, 1): feature 3*4 + 2 + 1
    const h = 4,
      w = 8;
    expect(z[3 * h * w + 3 * w + 5]).toBe((1 * cols + 2) * 64 + 3 * 4 + 3);
    expect(Array.from(imageIds(rows, cols).slice(0, 9))).toEqual([0, 0, 0, 0, 0, 1, 0, 0, 2]);
  });

  test("seeded noise: same seed same numbers; negative and huge seeds are fine; roughly standard normal", () => {
    expect(new SeededRandom(42).normals(5)).toEqual(new SeededRandom(42).normals(5));
    expect(new SeededRandom(42).normals(5)).not.toEqual(new SeededRandom(43).normals(5));
    expect(new SeededRandom(-1).normals(3)).not.toEqual(new SeededRandom(0).normals(3));
    const v = new SeededRandom(Number.MAX_SAFE_INTEGER).normals(20_000);
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    const variance = v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length;
    expect(Math.abs(mean)).toBeLessThan(0.05);
    expect(Math.abs(variance - 1)).toBeLessThan(0.05);
  });
});
