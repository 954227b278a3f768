import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { createImageHandler } from "../../../handlers/image/handler.ts";
import type { S3Config } from "../../../runtime/protocol/job-request.ts";
import { s3FromEnv } from "../../helpers/s3-server.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { startLoop, type TestLoop } from "../../helpers/worker-loop.ts";
import { makeTinyModels, tinyOptions, type TinyModels } from "./tiny-models.ts";

let models: TinyModels;
let srv: TestServer;
let workers: TestLoop[];
let s3: S3Config;

beforeAll(async () => {
  [models, s3] = await Promise.all([makeTinyModels(), s3FromEnv()]);
  srv = await startTestServer({
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 },
    endpoints: { "image-quality": { workersMax: 0 }, "image-fast": { workersMax: 0 } },
  });
  workers = [
    startLoop(srv, createImageHandler("quality"), {
      endpoint: "image-quality",
      workerId: "wq",
      handlerOptions: tinyOptions(models, "quality"),
    }),
    startLoop(srv, createImageHandler("fast"), { endpoint: "image-fast", workerId: "wf", handlerOptions: tinyOptions(models, "fast") }),
  ];
}, 120_000); // a first run may install Ceph for the S3 server

afterAll(async () => {
  for (const w of workers) await w[Symbol.asyncDispose]();
  await srv[Symbol.asyncDispose]();
  models.remove();
});

/** Runs a job synchronously; returns the job response and the image's bytes. */
async function generate(endpoint: string, input: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const [code, body] = await srv.json("POST", `/v2/${endpoint}/runsync`, { input, ...extra });
  if (code !== 200 || body.status !== "COMPLETED") throw new Error(`job did not complete: ${code} ${JSON.stringify(body)}`);
  const res = await fetch(body.output.image_url);
  expect(res.status).toBe(200);
  return { body, type: res.headers.get("content-type"), bytes: new Uint8Array(await res.arrayBuffer()) };
}

const small = { prompt: "a red cat", width: 256, height: 256, num_inference_steps: 2 };

describe("output", () => {
  test("the job response is {id, status, output: {image_url, cost}, delayTime, executionTime, workerId}", async () => {
    const { body } = await generate("image-quality", small);
    expect(body).toEqual({
      id: expect.stringMatching(/^sync-/),
      status: "COMPLETED",
      output: { image_url: expect.stringContaining(`/files/image-quality/${body.id}/image.jpg?`), cost: 0.00131072 },
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "wq",
    });
  });

  test.each([
    ["image-quality", "png", 320, 1024],
    ["image-quality", "jpeg", 1536, 256],
    ["image-fast", "png", 256, 448],
    ["image-fast", "jpeg", 1024, 1024],
  ] as const)("%s %s decodes back to %ix%i", async (endpoint, format, width, height) => {
    const { type, bytes } = await generate(endpoint, { ...small, width, height, image_format: format });
    expect(type).toBe(`image/${format}`);
    const meta = await sharp(bytes).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height, channels: meta.channels }).toEqual({
      format,
      width,
      height,
      channels: 3,
    });
  });

  test("image_format defaults to jpeg", async () => {
    const { type, bytes } = await generate("image-fast", { prompt: "x", width: 256, height: 256 });
    expect([type, (await sharp(bytes).metadata()).format]).toEqual(["image/jpeg", "jpeg"]);
  });
});

describe("determinism by seed", () => {
  test.each(["image-quality", "image-fast"])(
    "%s: the same seed and input give identical bytes; another seed another image",
    async (endpoint) => {
      const a = await generate(endpoint, { ...small, seed: 1234, image_format: "png" });
      const b = await generate(endpoint, { ...small, seed: 1234, image_format: "png" });
      const c = await generate(endpoint, { ...small, seed: 1235, image_format: "png" });
      expect(b.body.output.image_url).not.toBe(a.body.output.image_url);
      expect(Buffer.from(b.bytes).equals(Buffer.from(a.bytes))).toBe(true);
      expect(Buffer.from(c.bytes).equals(Buffer.from(a.bytes))).toBe(false);
      const jpegA = await generate(endpoint, { ...small, seed: 99 });
      const jpegB = await generate(endpoint, { ...small, seed: 99 });
      expect(Buffer.from(jpegA.bytes).equals(Buffer.from(jpegB.bytes))).toBe(true);
    },
  );

  test("seed -1 picks a random seed: two jobs differ", async () => {
    const a = await generate("image-fast", { ...small, seed: -1, image_format: "png" });
    const b = await generate("image-fast", { ...small, seed: -1, image_format: "png" });
    expect(Buffer.from(a.bytes).equals(Buffer.from(b.bytes))).toBe(false);
  });

  test("the prompt changes the image", async () => {
    const a = await generate("image-fast", { ...small, seed: 5, image_format: "png" });
    const b = await generate("image-fast", { ...small, prompt: "a blue dog", seed: 5, image_format: "png" });
    expect(Buffer.from(a.bytes).equals(Buffer.from(b.bytes))).toBe(false);
  });
});

describe("guidance", () => {
  const same = (a: { bytes: Uint8Array }, b: { bytes: Uint8Array }) => Buffer.from(a.bytes).equals(Buffer.from(b.bytes));
  const png = { ...small, seed: 7, image_format: "png" };

  test("quality honours guidance (embedding) and negative_prompt (true CFG)", async () => {
    const base = await generate("image-quality", { ...png, guidance: 3.5 });
    expect(same(base, await generate("image-quality", { ...png, guidance: 6 }))).toBe(false);
    expect(same(base, await generate("image-quality", { ...png, guidance: 3.5, negative_prompt: "blurry" }))).toBe(false);
  });

  test("as diffusers' FluxPipeline: unset guidance is dev's 3.5; true CFG only with a negative_prompt, at true_cfg_scale (default 4, 1 = off)", async () => {
    const base = await generate("image-quality", { ...png, guidance: 3.5 });
    expect(same(base, await generate("image-quality", png))).toBe(true);
    // true_cfg_scale without a negative prompt changes nothing
    expect(same(base, await generate("image-quality", { ...png, true_cfg_scale: 7 }))).toBe(true);
    // a negative prompt at scale 1 is no CFG at all
    expect(same(base, await generate("image-quality", { ...png, negative_prompt: "blurry", true_cfg_scale: 1 }))).toBe(true);
    const cfg = await generate("image-quality", { ...png, negative_prompt: "blurry" });
    expect(same(cfg, await generate("image-quality", { ...png, negative_prompt: "blurry", true_cfg_scale: 4 }))).toBe(true);
    expect(same(cfg, await generate("image-quality", { ...png, negative_prompt: "blurry", true_cfg_scale: 6 }))).toBe(false);
  });

  test("fast ignores guidance and negative_prompt, as schnell does", async () => {
    const base = await generate("image-fast", { ...png, guidance: 0 });
    expect(same(base, await generate("image-fast", { ...png, guidance: 10 }))).toBe(true);
    expect(same(base, await generate("image-fast", { ...png, guidance: 0, negative_prompt: "blurry" }))).toBe(true);
  });
});

describe("uploads", () => {
  test("with s3Config the image goes to the real S3 server; the presigned URL lasts 7 days", async () => {
    const { body, type, bytes } = await generate("image-fast", { ...small, image_format: "png" }, { s3Config: s3 });
    const url = new URL(body.output.image_url);
    expect(`${url.origin}${url.pathname}`).toBe(`${s3.endpointUrl}/${s3.bucketName}/${body.id}/image.png`);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("604800");
    expect(type).toBe("image/png");
    expect((await sharp(bytes).metadata()).width).toBe(256);
  });

  test("without s3Config the image goes to the server's file store at a signed URL that lasts 7 days", async () => {
    const before = Date.now();
    const { body, type } = await generate("image-quality", small);
    const url = new URL(body.output.image_url);
    expect(`${url.origin}${url.pathname}`).toBe(`${srv.url}/files/image-quality/${body.id}/image.jpg`);
    expect(Number(url.searchParams.get("expires"))).toBeGreaterThanOrEqual(before + 7 * 24 * 3600_000);
    expect(type).toBe("image/jpeg");
  });
});

describe("cost", () => {
  test("each completed job's cost is charged to the submitting key, per endpoint", async () => {
    const before = await srv.store.usage();
    await generate("image-quality", { ...small, width: 1024, height: 1024, num_inference_steps: 1 });
    await generate("image-fast", { ...small, width: 1536, height: 1024, num_inference_steps: 1 });
    const after = await srv.store.usage();
    const delta = (endpointId: string) => {
      const get = (rows: typeof after) => rows.find((r) => r.endpointId === endpointId) ?? { jobs: 0, cost: 0 };
      return { jobs: get(after).jobs - get(before).jobs, cost: Number((get(after).cost - get(before).cost).toFixed(10)) };
    };
    expect(delta("image-quality")).toEqual({ jobs: 1, cost: 0.02097152 });
    expect(delta("image-fast")).toEqual({ jobs: 1, cost: 0.0037748736 });
  });
});
