#!/usr/bin/env bun
/**
 * GPU check: builds image-fast and text with `spool build --gpu cuda`, runs each binary as the
 * worker of a local `spool serve` on the tiny fp16 image model and the tiny GGUF with
 * device = "cuda" (one worker per GPU, two at most: two workers on two GPUs when there are two),
 * and prints the GPU each worker was given (CUDA_VISIBLE_DEVICES, from the scaler's log) and the
 * one it ran on (nvidia-smi's compute processes), with seconds per denoising step and per
 * generated token beside the same jobs on the CPU (the same binaries, device = "cpu").
 *
 *   bun scripts/gpu-check.ts [--rounds 3] [--steps 8] [--tokens 128] [--rehearse]
 *
 * On a machine with no NVIDIA GPU (nvidia-smi missing or listing none) it says so and exits 0.
 * --rehearse runs the same steps on a CPU host (no --gpu build, device = "cpu" in place of cuda),
 * to try the check itself where there is no GPU.
 * Exit codes: 0 checked (or no GPU), 1 a build, a worker or a job failed.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { detectGpus } from "../runtime/config/gpus.ts";
import { makeTinyFlux } from "../handlers/image/tiny-model/make-tiny-flux.ts";
import { writeTinyGguf } from "../handlers/text/tiny-gguf.ts";
import { exitCleanup } from "./bench/harness/exit-cleanup.ts";
import { killGroup } from "./bench/harness/processes.ts";
import { bearer, waitForIdleWorker } from "./bench/harness/spool-http.ts";
import { REPO_ROOT, startSpool, type SpoolProcess } from "./bench/harness/spool-process.ts";
import { printTable } from "./bench/harness/table.ts";
import { makeTempDir, removeDir } from "./bench/harness/temp-dir.ts";
import { computeApps, withChildren, workerPids } from "./gpu-check/nvidia.ts";

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    rounds: { type: "string", default: "3" },
    steps: { type: "string", default: "8" },
    tokens: { type: "string", default: "128" },
    rehearse: { type: "boolean", default: false },
  },
});
const ROUNDS = Math.max(1, Number(flags.rounds) || 3);
const STEPS = Math.min(8, Math.max(2, Number(flags.steps) || 8)); // image-fast takes 1..8 steps
const TOKENS = Math.max(1, Number(flags.tokens) || 128);

const REHEARSE = flags.rehearse!;
const DEVICE = REHEARSE ? "cpu" : "cuda";
const gpus = REHEARSE ? [{ id: "none (rehearsal on the CPU)" }] : detectGpus();
if (gpus.length === 0) {
  console.log("gpu-check: no GPU here (nvidia-smi is missing or lists none); nothing to check");
  process.exit(0);
}
const WORKERS = Math.min(2, gpus.length);
console.log(
  `gpu-check: ${gpus.length} GPU(s): ${gpus.map((g) => `${g.index === undefined ? "" : `${g.index}: `}${g.id} (${g.memoryMb ?? "?"} MiB)`).join(", ")}; ${WORKERS} cuda worker(s) per model`,
);

const tmp = makeTempDir("spool-gpu-check-");
let server: SpoolProcess | undefined;
const cleanup = exitCleanup(async () => {
  if (server) killGroup(server.proc.pid, "SIGKILL");
  removeDir(tmp);
});

/** What the server's log (its workers' error output included) says about each worker. */
const started = new Map<string, { endpoint: string; gpus: string }>();
const notes: string[] = [];
function onLog(line: string): void {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line);
  } catch {
    return;
  }
  if (entry.msg === "started worker")
    started.set(String(entry.workerId), {
      endpoint: String(entry.endpointId),
      gpus: Array.isArray(entry.gpus) ? entry.gpus.join(",") : "-",
    });
  if (entry.msg === "text model layers placed") notes.push(`text: ${entry.gpuLayers} of ${entry.totalLayers} layers on ${entry.device}`);
  if (entry.level === "error" || /failed to start/.test(String(entry.msg))) notes.push(`log: ${line.slice(0, 300)}`);
}

function build(handler: string, name: string): string {
  const out = join(tmp, "bin", name);
  const gpu = REHEARSE ? [] : ["--gpu", "cuda"];
  console.log(`building ${handler} ${gpu.join(" ")} ...`);
  const r = Bun.spawnSync([process.execPath, "runtime/cli.ts", "build", handler, ...gpu, "--outfile", out], {
    cwd: REPO_ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (r.exitCode !== 0) throw new Error(`spool build ${handler} ${gpu.join(" ")} failed:\n${r.stdout}${r.stderr}`);
  return out;
}

function config(image: string, text: string, flux: string, gguf: string): string {
  const endpoint = (id: string, handler: string, device: string, workers: number, options: string) =>
    `[endpoints.${id}]\nhandler = ${JSON.stringify(handler)}\nworkersMin = ${workers}\nworkersMax = ${workers}\nidleTimeout = 3600\nscalerType = "REQUEST_COUNT"\nscalerValue = 1\n` +
    `[endpoints.${id}.options]\ndevice = "${device}"\n${options}\n`;
  const img = `model = ${JSON.stringify(flux)}\nmaxSequenceLength = 256\n`;
  const txt = `model = ${JSON.stringify(gguf)}\nsequences = 1\n`;
  return (
    "[server]\nscaleIntervalMs = 200\n\n" +
    endpoint("image-cuda", image, DEVICE, WORKERS, img) +
    endpoint("image-cpu", image, "cpu", 1, img) +
    endpoint("text-cuda", text, DEVICE, WORKERS, txt) +
    endpoint("text-cpu", text, "cpu", 1, txt)
  );
}

/** A runsync job; its server-measured executionTime (ms), worker and output. */
async function job(endpoint: string, input: unknown): Promise<{ ms: number; workerId: string; output: any }> {
  const res = await fetch(`${server!.url}/v2/${endpoint}/runsync?wait=300000`, {
    method: "POST",
    headers: bearer(server!.key),
    body: JSON.stringify({ input }),
  });
  const body = (await res.json()) as { status?: string; executionTime: number; workerId: string; output: unknown };
  if (body.status !== "COMPLETED") throw new Error(`${endpoint}: job answered ${JSON.stringify(body).slice(0, 500)}`);
  return { ms: body.executionTime, workerId: body.workerId, output: body.output };
}

/** Runs `n` copies of a job at once (one per worker), noting the GPUs nvidia-smi shows each worker's process on meanwhile. */
async function parallel(endpoint: string, n: number, input: unknown, seen: Map<string, Set<string>>) {
  let running = true;
  const sample = (async () => {
    while (running) {
      const apps = computeApps();
      for (const [workerId, pid] of workerPids()) {
        const tree = new Set(withChildren(pid));
        for (const a of apps) if (tree.has(a.pid)) seen.set(workerId, (seen.get(workerId) ?? new Set()).add(`${a.gpu} (${a.usedMb} MiB)`));
      }
      await Bun.sleep(200);
    }
  })();
  try {
    return await Promise.all(Array.from({ length: n }, () => job(endpoint, input)));
  } finally {
    running = false;
    await sample;
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const image = build("handlers/image/fast.ts", "image-fast");
  const text = build("handlers/text/handler.ts", "text");
  const flux = join(tmp, "tiny-flux-fp16");
  await makeTinyFlux(flux, { variant: "schnell", precision: "fp16" });
  const gguf = writeTinyGguf(join(tmp, "tiny.gguf"));
  mkdirSync(join(tmp, "data"), { recursive: true });
  writeFileSync(join(tmp, "spool.toml"), config(image, text, flux, gguf));
  server = await startSpool({
    name: "spool",
    dataDir: join(tmp, "data"),
    configPath: join(tmp, "spool.toml"),
    detached: true,
    readyTimeoutMs: 60_000,
    onStderrLine: onLog,
  });
  for (const ep of ["image-cuda", "image-cpu", "text-cuda", "text-cpu"]) await waitForIdleWorker(server, ep, 180);

  const seen = new Map<string, Set<string>>();
  const rows: string[][] = [];
  const perWorker = new Map<string, number[]>();
  const imageInput = (steps: number) => ({ prompt: "a lighthouse at dusk", width: 256, height: 256, num_inference_steps: steps, seed: 1 });
  const textInput = { messages: [{ role: "user", content: "Tell me a story" }], sampling_params: { max_tokens: TOKENS } };
  for (const [ep, device, n] of [
    ["image-cuda", DEVICE, WORKERS],
    ["image-cpu", "cpu", 1],
  ] as const) {
    await parallel(ep, n, imageInput(1), seen); // warm-up: the first run at a shape allocates
    const one: number[] = [];
    const many: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const j of await parallel(ep, n, imageInput(1), seen)) one.push(j.ms);
      for (const j of await parallel(ep, n, imageInput(STEPS), seen)) {
        many.push(j.ms);
        perWorker.set(j.workerId, [...(perWorker.get(j.workerId) ?? []), j.ms]);
      }
    }
    rows.push([
      "image-fast (tiny fp16, 256x256)",
      device,
      `${((median(many) - median(one)) / (STEPS - 1)).toFixed(1)} ms/step`,
      `${median(many)} ms for ${STEPS} steps`,
    ]);
  }
  for (const [ep, device, n] of [
    ["text-cuda", DEVICE, WORKERS],
    ["text-cpu", "cpu", 1],
  ] as const) {
    await parallel(ep, n, { ...textInput, sampling_params: { max_tokens: 4 } }, seen);
    const perToken: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const j of await parallel(ep, n, textInput, seen)) {
        const tokens =
          (j.output as { usage?: { output?: number } }[]).reduce((sum, chunk) => sum + (chunk.usage?.output ?? 0), 0) || TOKENS;
        perToken.push(j.ms / tokens);
        perWorker.set(j.workerId, [...(perWorker.get(j.workerId) ?? []), j.ms]);
      }
    }
    rows.push(["text (tiny GGUF)", device, `${median(perToken).toFixed(2)} ms/token`, `up to ${TOKENS} tokens a job, prompt included`]);
  }

  console.log("\nworkers:");
  printTable(
    ["endpoint", "worker", "CUDA_VISIBLE_DEVICES", "on the GPU (nvidia-smi)", "jobs"],
    "lllll",
    [...started].map(([id, w]) => [
      w.endpoint,
      id,
      w.gpus,
      [...(seen.get(id) ?? [])].join(", ") || "none seen",
      String(perWorker.get(id)?.length ?? 0),
    ]),
  );
  console.log("\ntimings (medians of %d rounds; server-measured execution time):", ROUNDS);
  printTable(["model", "device", "per step / token", "job"], "llrl", rows);
  for (const n of new Set(notes)) console.log(n);
}

let code = 0;
try {
  await main();
} catch (err) {
  console.error(`gpu-check: ${(err as Error).message}`);
  if (server) console.error(server.output().slice(-4000));
  code = 1;
} finally {
  await cleanup.run();
}
process.exit(code);
