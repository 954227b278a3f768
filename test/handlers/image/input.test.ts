import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { createImageHandler } from "../../../handlers/image/handler.ts";
import { imageOptions } from "../../../handlers/image/options.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";
import { startLoop, type TestLoop } from "../../helpers/worker-loop.ts";
import { makeTinyModels, tinyOptions, type TinyModels } from "./tiny-models.ts";

const QUALITY = resolve(import.meta.dir, "../../../handlers/image/quality.ts");
const FAST = resolve(import.meta.dir, "../../../handlers/image/fast.ts");
type Variant = "quality" | "fast";

/** Each invalid input with the message it must produce, per variant. */
function invalidCases(variant: Variant): [Record<string, unknown>, string][] {
  const maxSteps = variant === "quality" ? 50 : 8;
  return [
    [{}, "prompt: is required"],
    [{ prompt: "" }, "prompt: must not be empty"],
    [{ prompt: 5 }, "prompt: must be a string"],
    [{ prompt: "p", negative_prompt: 5 }, "negative_prompt: must be a string"],
    [{ prompt: "p", width: 192 }, "width: must be at least 256"],
    [{ prompt: "p", width: 1600 }, "width: must be at most 1536"],
    [{ prompt: "p", width: 1000 }, "width: must be divisible by 64"],
    [{ prompt: "p", width: 320.5 }, "width: must be an integer"],
    [{ prompt: "p", width: "512" }, "width: must be an integer"],
    [{ prompt: "p", height: 128 }, "height: must be at least 256"],
    [{ prompt: "p", height: 1600 }, "height: must be at most 1536"],
    [{ prompt: "p", height: 1088 + 32 }, "height: must be divisible by 64"],
    [{ prompt: "p", num_inference_steps: 0 }, "num_inference_steps: must be at least 1"],
    [{ prompt: "p", num_inference_steps: maxSteps + 1 }, `num_inference_steps: must be at most ${maxSteps}`],
    [{ prompt: "p", num_inference_steps: 2.5 }, "num_inference_steps: must be an integer"],
    [{ prompt: "p", guidance: -0.01 }, "guidance: must be at least 0.0"],
    [{ prompt: "p", guidance: 10.01 }, "guidance: must be at most 10.0"],
    [{ prompt: "p", guidance: "high" }, "guidance: must be a number"],
    [{ prompt: "p", true_cfg_scale: 0.5 }, "true_cfg_scale: must be at least 1.0"],
    [{ prompt: "p", true_cfg_scale: 10.5 }, "true_cfg_scale: must be at most 10.0"],
    [{ prompt: "p", seed: 1.5 }, "seed: must be an integer (-1 for a random seed)"],
    [{ prompt: "p", seed: 2 ** 53 }, "seed: must be an integer (-1 for a random seed)"],
    [{ prompt: "p", image_format: "gif" }, 'image_format: must be "png" or "jpeg"'],
  ];
}

function validCases(variant: Variant): Record<string, unknown>[] {
  const maxSteps = variant === "quality" ? 50 : 8;
  return [
    { prompt: "p" },
    { prompt: "p", negative_prompt: "" },
    { prompt: "p", width: 256, height: 1536 },
    { prompt: "p", width: 1536, height: 256 },
    { prompt: "p", num_inference_steps: 1 },
    { prompt: "p", num_inference_steps: maxSteps },
    { prompt: "p", guidance: 0 },
    { prompt: "p", guidance: 10 },
    { prompt: "p", seed: -1 },
    { prompt: "p", seed: 0 },
    { prompt: "p", seed: -7 },
    { prompt: "p", seed: Number.MAX_SAFE_INTEGER },
    { prompt: "p", image_format: "png" },
    { prompt: "p", image_format: "jpeg" },
  ];
}

describe("the input schema", () => {
  test("defaults follow the spec's table (1024x1024, 28 or 4 steps, seed -1, jpeg); guidance unset means the model's own (3.5 on dev)", () => {
    const quality = createImageHandler("quality").input.parse({ prompt: "a cat" });
    expect(quality).toEqual({ prompt: "a cat", width: 1024, height: 1024, num_inference_steps: 28, seed: -1, image_format: "jpeg" });
    expect(createImageHandler("fast").input.parse({ prompt: "a cat" }).num_inference_steps).toBe(4);
  });

  test("options default to the spec's prices and the cpu device, and refuse an unknown device", () => {
    expect(imageOptions("quality").parse({ dataDir: "/d" })).toEqual({ device: "cpu", price: 0.02, maxSequenceLength: 512, dataDir: "/d" });
    expect(imageOptions("fast").parse({ dataDir: "/d" })).toEqual({ device: "cpu", price: 0.0024, maxSequenceLength: 256, dataDir: "/d" });
    expect(imageOptions("fast").safeParse({ device: "tpu" }).success).toBe(false);
  });
});

describe.each(["quality", "fast"] as const)("%s: every parameter at its boundaries", (variant) => {
  let models: TinyModels;
  let srv: TestServer;
  let worker: TestLoop;
  const endpoint = `image-${variant}`;
  beforeAll(async () => {
    models = await makeTinyModels();
    srv = await startTestServer({
      server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 },
      endpoints: {
        // the server validates this one's input with the handler's schema
        [endpoint]: { handler: variant === "quality" ? QUALITY : FAST, workersMax: 0 },
        // no handler known to the server: input reaches the worker unchecked
        raw: { workersMax: 0 },
      },
    });
    worker = startLoop(srv, createImageHandler(variant), { endpoint: "raw", handlerOptions: tinyOptions(models, variant) });
  });
  afterAll(async () => {
    await worker[Symbol.asyncDispose]();
    await srv[Symbol.asyncDispose]();
    models.remove();
  });

  test("invalid input: 400 at submission naming the field, and nothing is queued", async () => {
    for (const [input, message] of invalidCases(variant)) {
      const [code, body] = await srv.json("POST", `/v2/${endpoint}/run`, { input });
      expect({ input, code, body }).toEqual({ input, code: 400, body: { error: `Invalid parameter: ${message}` } });
    }
    expect((await srv.json("GET", `/v2/${endpoint}/health`))[1].jobs.inQueue).toBe(0);
  });

  test("valid input at each boundary is accepted at submission", async () => {
    for (const input of validCases(variant)) {
      const [code] = await srv.json("POST", `/v2/${endpoint}/run`, { input });
      expect({ input, code }).toEqual({ input, code: 200 });
    }
    expect((await srv.json("POST", `/v2/${endpoint}/purge-queue`))[1].removed).toBe(validCases(variant).length);
  });

  test("invalid input that reaches a worker directly ends FAILED with the same message", async () => {
    const ids: [string, string][] = [];
    for (const [input, message] of invalidCases(variant)) {
      const [code, body] = await srv.json("POST", "/v2/raw/run", { input });
      expect(code).toBe(200);
      ids.push([body.id, message]);
    }
    for (const [id, message] of ids) {
      const done = await until(async () => {
        const [, s] = await srv.json("GET", `/v2/raw/status/${id}`);
        return s.status !== "IN_QUEUE" && s.status !== "IN_PROGRESS" && s;
      }, `job ${id}`);
      expect({ status: done.status, error: done.error }).toEqual({ status: "FAILED", error: `Invalid parameter: ${message}` });
    }
  });

  test("the extreme valid sizes and step counts generate", async () => {
    const maxSteps = variant === "quality" ? 50 : 8;
    const inputs = [
      { prompt: "wide", width: 1536, height: 256, num_inference_steps: 1, guidance: 10, seed: Number.MAX_SAFE_INTEGER },
      { prompt: "tall", width: 256, height: 1536, num_inference_steps: 1, guidance: 0, seed: -7 },
      { prompt: "long", width: 256, height: 256, num_inference_steps: maxSteps },
    ];
    for (const input of inputs) {
      const [code, body] = await srv.json("POST", "/v2/raw/runsync", { input });
      expect([code, body.status, Object.keys(body.output ?? {}).sort()]).toEqual([200, "COMPLETED", ["cost", "image_url"]]);
    }
  });
});
