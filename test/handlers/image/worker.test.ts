import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { checkDevice, DeviceUnavailableError } from "../../../handlers/image/device.ts";
import { createImageHandler } from "../../../handlers/image/handler.ts";
import { FluxPipeline } from "../../../handlers/image/pipeline.ts";
import type { HandlerContext } from "../../../sdk/index.ts";
import { imageCuda, renderNode } from "../../helpers/gpu.ts";
import { startTestServer } from "../../helpers/test-server.ts";
import { until } from "../../helpers/until.ts";
import { startLoop } from "../../helpers/worker-loop.ts";
import { makeTinyModels, tinyOptions, type TinyModels } from "./tiny-models.ts";

const polling = { server: { takeWaitMs: 30_000, stopWaitMs: 30_000, scaleIntervalMs: 3_600_000 }, endpoints: { img: { workersMax: 0 } } };
let models: TinyModels;
beforeAll(async () => {
  models = await makeTinyModels();
});
afterAll(() => models.remove());

const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true })));

describe("cancel", () => {
  test("a cancelled job stops between steps: the handler ends with the cancel reason, no later step runs", async () => {
    await using srv = await startTestServer(polling);
    const handler = createImageHandler("quality");
    const steps: number[] = [];
    let ended: unknown;
    // The real handler, with a ctx whose progress (posted after each step) cancels the job at
    // step 2 and holds that step until the worker's signal has fired.
    const watched = {
      ...handler,
      async handler(job: Parameters<typeof handler.handler>[0], ctx: HandlerContext<any>) {
        const progress = async (value: unknown) => {
          const { step } = value as { step: number };
          steps.push(step);
          if (step === 2) {
            await srv.json("POST", `/v2/img/cancel/${job.id}`);
            await aborted(ctx.signal);
          }
        };
        try {
          return await handler.handler(job, { ...ctx, progress });
        } catch (err) {
          ended = err;
          throw err;
        }
      },
    };
    await using _w = startLoop(srv, watched, { endpoint: "img", handlerOptions: tinyOptions(models, "quality") });
    const [, { id }] = await srv.json("POST", "/v2/img/run", { input: { prompt: "x", width: 256, height: 256, num_inference_steps: 50 } });
    await until(() => ended, "the handler to end");
    expect(steps).toEqual([1, 2]);
    expect(ended).toMatchObject({ name: "JobCancelled" });
    expect((await srv.json("GET", `/v2/img/status/${id}`))[1]).toMatchObject({ id, status: "CANCELLED" });
    expect(await srv.store.usage()).toEqual([]); // nothing charged
  });

  test("the pipeline checks its signal before every step and before decoding", async () => {
    const pipeline = await FluxPipeline.load(models.schnell, { device: "cpu", maxSequenceLength: 256 });
    try {
      const controller = new AbortController();
      const reason = new Error("stop now");
      const seen: number[] = [];
      const run = pipeline.generate(
        { prompt: "x", width: 256, height: 256, steps: 8, guidance: 0, seed: 1 },
        { signal: controller.signal, onStep: (step) => void (seen.push(step), step === 3 && controller.abort(reason)) },
      );
      expect(
        await run.then(
          () => "finished",
          (err: unknown) => err,
        ),
      ).toBe(reason);
      expect(seen).toEqual([1, 2, 3]);
      const last = new AbortController();
      const atEnd = pipeline.generate(
        { prompt: "x", width: 256, height: 256, steps: 2, guidance: 0, seed: 1 },
        { signal: last.signal, onStep: (step) => void (step === 2 && last.abort(reason)) },
      );
      expect(
        await atEnd.then(
          () => "decoded",
          (err: unknown) => err,
        ),
      ).toBe(reason);
    } finally {
      await pipeline.dispose();
      await pipeline.dispose(); // idempotent
    }
  });
});

describe("device", () => {
  test.if(!imageCuda())("cuda where this machine cannot run it: a clear DeviceUnavailableError", async () => {
    const err = await checkDevice("cuda").then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DeviceUnavailableError);
    expect(String((err as Error).message)).toStartWith('device "cuda" is not available: ');
  });

  test.if(imageCuda())("cuda on this machine's NVIDIA GPU runs a test graph", async () => {
    expect(await checkDevice("cuda")).toBeUndefined();
  });

  test.if(!renderNode())("webgpu without a GPU render node: a clear DeviceUnavailableError", async () => {
    const err = await checkDevice("webgpu").then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DeviceUnavailableError);
    expect(String((err as Error).message)).toStartWith('device "webgpu" is not available: ');
  });

  test("cpu is", async () => {
    expect(await checkDevice("cpu")).toBeUndefined();
  });

  test.if(!imageCuda())(
    "a worker configured for cuda where it cannot run does not start: setup fails with the device error, no job is taken",
    async () => {
      await using srv = await startTestServer(polling);
      const [, { id }] = await srv.json("POST", "/v2/img/run", { input: { prompt: "x" } });
      const loop = startLoop(srv, createImageHandler("fast"), {
        endpoint: "img",
        handlerOptions: tinyOptions(models, "fast", { device: "cuda" }),
      });
      const err = await loop.finished.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DeviceUnavailableError);
      expect((err as Error).message).toContain('device "cuda" is not available');
      expect((await srv.json("GET", `/v2/img/status/${id}`))[1].status).toBe("IN_QUEUE");
      expect((await srv.json("GET", "/v2/img/health"))[1].workers).toMatchObject({ idle: 0, running: 0 });
    },
  );

  test.if(!renderNode())(
    "`spool worker` on an image handler with device webgpu and no GPU render node exits non-zero, printing the reason",
    async () => {
      const cli = resolve(import.meta.dir, "../../../runtime/cli.ts");
      const handler = resolve(import.meta.dir, "../../../handlers/image/fast.ts");
      const proc = Bun.spawn(
        [process.execPath, cli, "worker", handler, "--url", "http://127.0.0.1:9", "--endpoint", "img", "--api-key", "k", "--no-supervise"],
        {
          env: { ...process.env, SPOOL_HANDLER_OPTIONS: JSON.stringify(tinyOptions(models, "fast", { device: "webgpu" })) },
          stdout: "pipe",
          stderr: "pipe",
        },
      );
      const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
      expect(code).not.toBe(0);
      expect(stderr).toContain('device "webgpu" is not available');
    },
  );
});

describe("model loading", () => {
  test("with no model configured, the demo model is generated under the data dir once and reused", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "spool-image-data-"));
    try {
      await using srv = await startTestServer(polling);
      const options = { dataDir }; // the endpoint's options as a fresh config gives them
      {
        await using _w = startLoop(srv, createImageHandler("fast"), {
          endpoint: "img",
          handlerOptions: createImageHandler("fast").options!.parse(options),
        });
        const [, body] = await srv.json("POST", "/v2/img/runsync", { input: { prompt: "noise", width: 256, height: 256 } });
        expect(body.status).toBe("COMPLETED");
      }
      const index = join(dataDir, "models/tiny-flux-schnell/model_index.json");
      expect(existsSync(index)).toBe(true);
      const made = statSync(index).mtimeMs;
      {
        await using _w = startLoop(srv, createImageHandler("fast"), {
          endpoint: "img",
          handlerOptions: createImageHandler("fast").options!.parse(options),
        });
        expect((await srv.json("POST", "/v2/img/runsync", { input: { prompt: "noise", width: 256, height: 256 } }))[1].status).toBe(
          "COMPLETED",
        );
      }
      expect(statSync(index).mtimeMs).toBe(made);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("a folder that is not a FLUX ONNX export fails setup naming the missing files", async () => {
    await using srv = await startTestServer(polling);
    const loop = startLoop(srv, createImageHandler("quality"), {
      endpoint: "img",
      handlerOptions: tinyOptions(models, "quality", { model: models.dir }),
    });
    await expect(loop.finished).rejects.toThrow(
      `model folder ${models.dir} is not a FLUX ONNX export this pipeline runs: scheduler/scheduler_config.json missing;`,
    );
  });

  test("a model that is neither a folder nor a hub id fails setup", async () => {
    await using srv = await startTestServer(polling);
    const loop = startLoop(srv, createImageHandler("quality"), {
      endpoint: "img",
      handlerOptions: tinyOptions(models, "quality", { model: "./no/such/folder" }),
    });
    await expect(loop.finished).rejects.toThrow('model "./no/such/folder" is neither a folder on this machine nor a hub id (owner/name)');
  });

  test("weights load once per worker: setup once, then every job on the same sessions", async () => {
    await using srv = await startTestServer(polling);
    const handler = createImageHandler("fast");
    let setups = 0;
    const counted = { ...handler, setup: async (o: Parameters<NonNullable<typeof handler.setup>>[0]) => (setups++, handler.setup!(o)) };
    await using _w = startLoop(srv, counted, { endpoint: "img", handlerOptions: tinyOptions(models, "fast", { price: 0.00123456789 }) });
    for (let i = 0; i < 3; i++) {
      const [, body] = await srv.json("POST", "/v2/img/runsync", {
        input: { prompt: `job ${i}`, width: 320, height: 256, num_inference_steps: 1 },
      });
      // a configured price, rounded up after the 10th decimal: 0.0001011358015488 -> 0.0001011359
      expect(body.output.cost).toBe(0.0001011359);
    }
    expect(setups).toBe(1);
  });
});
