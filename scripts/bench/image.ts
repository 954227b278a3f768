#!/usr/bin/env bun
/**
 * Image benchmark on the tiny models: seconds per denoising step at 256x256 and 1024x1024,
 *   - through the endpoint: a real `spool serve` (own process) whose scaler runs one worker per
 *     image endpoint (own processes); per step = (time of a max-step job - time of a 1-step
 *     job) / (max - 1), so text encoding, VAE, encoding and upload cancel out (max: 8 fast,
 *     50 quality); the two kinds of job alternate;
 *   - directly: the same transformer graph in an onnxruntime-node session in this process, fed
 *     tensors of the same shapes;
 * and their ratio (the pipeline's overhead per step), plus whole 4-step images both ways; then
 * precision: the tiny dev model in fp32, fp16 (fp16 inputs and outputs) and fp16 weights with fp32
 * inputs and outputs, through FluxPipeline in this process, per step and per whole image, at
 * 256x256 and 1024x1024 (how cost grows with image tokens: 256 -> 4096); medians of interleaved runs.
 *
 *   bun scripts/bench/image.ts [--repeat 5] [--device cpu] [--only precision]
 *
 * Times are the fastest of --repeat runs (each after a warm-up at its shape): on a machine shared
 * with other work the fastest run is the one least disturbed. It prints figures; it asserts
 * nothing but that every job completed.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { checkDevice } from "../../handlers/image/device.ts";
import { FluxPipeline } from "../../handlers/image/pipeline.ts";
import { makeTinyFlux } from "../../handlers/image/tiny-model/make-tiny-flux.ts";
import { exitCleanup } from "./harness/exit-cleanup.ts";
import { machine } from "./harness/machine.ts";
import { stopProcess } from "./harness/processes.ts";
import { bearer, waitForIdleWorker } from "./harness/spool-http.ts";
import { REPO_ROOT, startSpool, type SpoolProcess } from "./harness/spool-process.ts";
import { markdownTable, printTable, tableRow } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: { repeat: { type: "string", default: "5" }, device: { type: "string", default: "cpu" }, only: { type: "string" } },
});
const REPEAT = Math.max(1, Number(flags.repeat) || 5);
const DEVICE = flags.device as "cpu" | "cuda" | "webgpu";
const SIZES = [256, 1024] as const;
const VARIANTS = [
  { endpoint: "image-fast", tiny: "schnell", t5: 256, maxSteps: 8 },
  { endpoint: "image-quality", tiny: "dev", t5: 512, maxSteps: 50 },
] as const;

const fastest = (xs: number[]) => Math.min(...xs);
const fmt = (s: number) => (s < 0.01 ? `${(s * 1000).toFixed(2)} ms` : `${s.toFixed(3)} s`);

const gpuNote = async () => {
  const lines: string[] = [];
  for (const d of ["cuda", "webgpu"] as const) {
    const why = await checkDevice(d).then(
      () => "available",
      (e: Error) => e.message.split(";")[0]!.slice(0, 160),
    );
    lines.push(`  ${d}: ${why}`);
  }
  return lines.join("\n");
};

const tmp = makeTempDir("spool-bench-image-");
let server: SpoolProcess | undefined;
const cleanup = exitCleanup(async () => {
  if (server) await stopProcess(server.proc, 10_000);
  removeDir(tmp);
});

const models = { dev: join(tmp, "dev"), schnell: join(tmp, "schnell") };
let madeIn = performance.now();
await makeTinyFlux(models.dev, { variant: "dev" });
const devMs = performance.now() - madeIn;
madeIn = performance.now();
await makeTinyFlux(models.schnell, { variant: "schnell" });
const schnellMs = performance.now() - madeIn;

// ---------------------------------------------------------------------------------------------
// Direct: the transformer graph alone, then whole images through FluxPipeline in this process

async function directStep(model: string, t5: number, size: number): Promise<number> {
  const session = await ort.InferenceSession.create(join(model, "transformer/model.onnx"), {
    executionProviders: [DEVICE],
    graphOptimizationLevel: "all",
  });
  const tokens = (size / 16) ** 2;
  const f = (dims: number[], v = 0.1) => new ort.Tensor("float32", new Float32Array(dims.reduce((a, b) => a * b)).fill(v), dims);
  const feeds: Record<string, ort.Tensor> = {
    hidden_states: f([1, tokens, 64]),
    encoder_hidden_states: f([1, t5, 32]),
    pooled_projections: f([1, 32]),
    timestep: f([1], 0.5),
    img_ids: f([tokens, 3]),
    txt_ids: f([t5, 3], 0),
  };
  if (session.inputNames.includes("guidance")) feeds.guidance = f([1], 3.5);
  await session.run(feeds); // warm-up: first run at a shape allocates
  const times: number[] = [];
  for (let i = 0; i < REPEAT * 3; i++) {
    const t0 = performance.now();
    await session.run(feeds);
    times.push((performance.now() - t0) / 1000);
  }
  await session.release();
  return fastest(times);
}

async function directImage(model: string, t5: number, size: number, steps: number): Promise<number> {
  const p = await FluxPipeline.load(model, { device: DEVICE, maxSequenceLength: t5 });
  const req = { prompt: "a red cat", width: size, height: size, steps, guidance: 3.5, seed: 1 };
  await p.generate(req);
  const times: number[] = [];
  for (let i = 0; i < REPEAT; i++) {
    const t0 = performance.now();
    await p.generate(req);
    times.push((performance.now() - t0) / 1000);
  }
  await p.dispose();
  return fastest(times);
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

/**
 * fp32 against its fp16 twins on the tiny dev model, all three loaded at once and interleaved
 * run by run (so a busy machine slows them alike): per step = median over runs of
 * (16-step image - 1-step image) / 15; whole 4-step image = median.
 */
async function precisionTable(): Promise<void> {
  const twins = [
    { name: "fp32", dir: models.dev },
    { name: "fp16 (fp16 in/out)", dir: join(tmp, "dev-fp16"), options: { precision: "fp16" } as const },
    { name: "fp16 weights, fp32 in/out", dir: join(tmp, "dev-fp16-io32"), options: { precision: "fp16", io: "fp32" } as const },
  ];
  for (const t of twins) if (t.options) await makeTinyFlux(t.dir, { variant: "dev", ...t.options });
  const pipelines = await Promise.all(twins.map((t) => FluxPipeline.load(t.dir, { device: DEVICE, maxSequenceLength: 512 })));
  const rows: string[][] = [];
  for (const size of SIZES) {
    const timed = async (p: FluxPipeline, steps: number) => {
      const t0 = performance.now();
      await p.generate({ prompt: "a red cat", width: size, height: size, steps, guidance: 3.5, seed: 1 });
      return (performance.now() - t0) / 1000;
    };
    for (const p of pipelines) await timed(p, 1);
    const perStep = twins.map(() => [] as number[]);
    const image = twins.map(() => [] as number[]);
    for (let i = 0; i < REPEAT; i++) {
      for (const [k, p] of pipelines.entries()) {
        perStep[k]!.push(((await timed(p, 16)) - (await timed(p, 1))) / 15);
        image[k]!.push(await timed(p, 4));
      }
    }
    const [step0, image0] = [median(perStep[0]!), median(image[0]!)];
    for (const [k, t] of twins.entries()) {
      rows.push([
        `${t.name} ${size}x${size}`,
        fmt(median(perStep[k]!)),
        (median(perStep[k]!) / step0).toFixed(2),
        fmt(median(image[k]!)),
        (median(image[k]!) / image0).toFixed(2),
      ]);
    }
  }
  await Promise.all(pipelines.map((p) => p.dispose()));
  printTable(["tiny dev model, FluxPipeline in-process (medians)", "per step", "vs fp32", "whole 4-step image", "vs fp32"], "lrrrr", rows, {
    outerPipes: false,
  });
}

// ---------------------------------------------------------------------------------------------
// Through the endpoint: spool serve + its own worker processes

function startServer(): Promise<SpoolProcess> {
  const configPath = join(tmp, "bench.toml");
  const endpoint = (id: string, handler: string, model: string) =>
    `[endpoints.${id}]\nhandler = "${join(REPO_ROOT, "handlers/image", handler)}"\nworkersMin = 1\nworkersMax = 1\n\n[endpoints.${id}.options]\nmodel = "${model}"\ndevice = "${DEVICE}"\n`;
  writeFileSync(
    configPath,
    `[server]\nhost = "127.0.0.1"\ntakeWaitMs = 20000\n\n${endpoint("image-fast", "fast.ts", models.schnell)}\n${endpoint("image-quality", "quality.ts", models.dev)}`,
  );
  return startSpool({ name: "spool serve", dataDir: join(tmp, "data"), configPath });
}

async function runsync(server: SpoolProcess, endpoint: string, input: Record<string, unknown>): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${server.url}/v2/${endpoint}/runsync`, {
    method: "POST",
    headers: bearer(server.key),
    body: JSON.stringify({ input }),
  });
  const body = (await res.json()) as { status?: string };
  if (body.status !== "COMPLETED") throw new Error(`${endpoint} job ended ${JSON.stringify(body)}`);
  return (performance.now() - t0) / 1000;
}

/** Fastest time of a job with each step count, the counts alternating run by run. */
async function endpointTimes(server: SpoolProcess, endpoint: string, size: number, stepCounts: number[]): Promise<number[]> {
  const input = (steps: number) => ({
    prompt: "a red cat",
    width: size,
    height: size,
    num_inference_steps: steps,
    seed: 1,
    image_format: "png",
  });
  await runsync(server, endpoint, input(1)); // warm-up at this shape
  const times = stepCounts.map(() => [] as number[]);
  for (let i = 0; i < REPEAT; i++) {
    for (const [k, steps] of stepCounts.entries()) times[k]!.push(await runsync(server, endpoint, input(steps)));
  }
  return times.map(fastest);
}

// ---------------------------------------------------------------------------------------------

try {
  if (flags.only === "precision") {
    console.log(`bench-image precision: tiny dev model, device ${DEVICE}, bun ${Bun.version}, medians of ${REPEAT} interleaved runs\n`);
    await precisionTable();
    await cleanup.run();
    process.exit(0);
  }
  server = await startServer();
  for (const v of VARIANTS) await waitForIdleWorker(server, v.endpoint);
  const m = machine();
  console.log(`bench-image: tiny models, device ${DEVICE}, ${m.cores} CPU cores (${m.cpu}), bun ${Bun.version}, fastest of ${REPEAT}`);
  console.log(`tiny model generation: dev ${(devMs / 1000).toFixed(2)} s, schnell ${(schnellMs / 1000).toFixed(2)} s\n`);
  const plain = { outerPipes: false };
  for (const l of markdownTable(["seconds per step", "endpoint", "transformer session alone", "overhead ratio"], "lrrr", [], plain))
    console.log(l);
  const whole: string[][] = [];
  for (const v of VARIANTS) {
    for (const size of SIZES) {
      const [one, four, many] = await endpointTimes(server, v.endpoint, size, [1, 4, v.maxSteps]);
      const perStep = (many! - one!) / (v.maxSteps - 1);
      const direct = await directStep(models[v.tiny], v.t5, size);
      console.log(tableRow([`${v.endpoint} ${size}x${size}`, fmt(perStep), fmt(direct), (perStep / direct).toFixed(2)], plain));
      const fourDirect = await directImage(models[v.tiny], v.t5, size, 4);
      whole.push([`${v.endpoint} ${size}x${size}`, fmt(four!), fmt(fourDirect), (four! / fourDirect).toFixed(2)]);
    }
  }
  console.log("");
  printTable(["whole 4-step image", "endpoint (POST /runsync, png, upload)", "FluxPipeline in-process", "ratio"], "lrrr", whole, plain);
  console.log("");
  await precisionTable();
  console.log(`\nGPU: not measured by this script; on this machine:\n${await gpuNote()}`);
} finally {
  await cleanup.run();
}
