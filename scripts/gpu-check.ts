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
import { join } from "node:path";
import { parseArgs } from "node:util";
import { detectGpus } from "../runtime/config/gpus.ts";
import { makeTinyFlux } from "../handlers/image/tiny-model/make-tiny-flux.ts";
import { writeTinyGguf } from "../handlers/text/tiny-gguf.ts";
import { exitCleanup } from "./bench/harness/exit-cleanup.ts";
import { REPO_ROOT } from "./bench/harness/spool-process.ts";
import { makeTempDir, removeDir } from "./bench/harness/temp-dir.ts";
import { runCheck, type CheckEndpoint } from "./gpu-check/measure.ts";

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
const cleanup = exitCleanup(async () => removeDir(tmp));

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

async function main(): Promise<boolean> {
  const image = build("handlers/image/fast.ts", "image-fast");
  const text = build("handlers/text/handler.ts", "text");
  const flux = join(tmp, "tiny-flux-fp16");
  await makeTinyFlux(flux, { variant: "schnell", precision: "fp16" });
  const gguf = writeTinyGguf(join(tmp, "tiny.gguf"));
  const endpoints: CheckEndpoint[] = [
    { id: "image-cuda", kind: "image", handler: image, device: DEVICE, label: DEVICE, workers: WORKERS, model: flux },
    { id: "image-cpu", kind: "image", handler: image, device: "cpu", label: "cpu", workers: 1, model: flux },
    { id: "text-cuda", kind: "text", handler: text, device: DEVICE, label: DEVICE, workers: WORKERS, model: gguf },
    { id: "text-cpu", kind: "text", handler: text, device: "cpu", label: "cpu", workers: 1, model: gguf },
  ];
  const result = await runCheck({ endpoints, settings: { rounds: ROUNDS, steps: STEPS, tokens: TOKENS }, dir: tmp });
  if (!result.ok) console.error(`gpu-check: ${result.error}\n${result.serverOutput?.slice(-4000) ?? ""}`);
  return result.ok;
}

let code = 0;
try {
  code = (await main()) ? 0 : 1;
} catch (err) {
  console.error(`gpu-check: ${(err as Error).message}`);
  code = 1;
} finally {
  await cleanup.run();
}
process.exit(code);
