/**
 * The program a GPU check bundle runs (bundled as check.js beside its Bun; run.sh starts it): the
 * bundled `spool serve` with two endpoints on the bundled worker, one on the GPU (webgpu for the
 * image part, vulkan for the text part) and one on the CPU, the same jobs on each, and what the
 * machine, the workers and nvidia-smi said.
 *
 *   bun check.js --part image|text [--cpu] [--rounds 10] [--steps 8] [--tokens 128] [--out DIR]
 *
 * --cpu: the CPU stands in for the GPU (device "cpu" on both endpoints), to try the bundle on a
 * machine with no GPU. Exit codes: 0 checked, 1 a worker or a job failed, 2 bad flags.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { detectGpus } from "../../runtime/config/gpus.ts";
import { runCheck, type CheckEndpoint } from "../gpu-check/measure.ts";
import { LAYOUT, PARTS } from "./layout.ts";

const ROOT = import.meta.dir;

const { values: flags } = parseArgs({
  args: Bun.argv.slice(2),
  options: {
    part: { type: "string" },
    cpu: { type: "boolean", default: false },
    // The tiny models' jobs take milliseconds, and fixed costs vary: more rounds steady the medians.
    rounds: { type: "string", default: "10" },
    steps: { type: "string", default: "8" },
    tokens: { type: "string", default: "128" },
    out: { type: "string" },
  },
});
const part = flags.part === "image" || flags.part === "text" ? PARTS[flags.part] : undefined;
if (!part) {
  console.error("usage: bun check.js --part image|text [--cpu] [--rounds N] [--steps N] [--tokens N] [--out DIR]");
  process.exit(2);
}
const settings = {
  rounds: Math.max(1, Number(flags.rounds) || 10),
  steps: Math.min(8, Math.max(2, Number(flags.steps) || 8)), // image-fast takes 1..8 steps
  tokens: Math.max(1, Number(flags.tokens) || 128),
};
const out = flags.out ?? process.env.OUT ?? join(ROOT, "out");
mkdirSync(out, { recursive: true });

const gpus = detectGpus();
const device = flags.cpu ? "cpu" : part.device;
// One worker per GPU, two at most. Vulkan numbers cards its own way, so a worker's card is
// counted and locked (gpusPerWorker 1, which also lets a sandboxed worker see the card) but not
// chosen: every worker sees every Vulkan device.
const workers = flags.cpu ? 1 : Math.max(1, Math.min(2, gpus.length));
const gpusPerWorker = !flags.cpu && gpus.length > 0 ? 1 : 0;
const model = join(ROOT, part.name === "image" ? LAYOUT.flux : LAYOUT.gguf);
const handler = join(ROOT, LAYOUT.workerCommand);
const kind = part.name;
const endpoints: CheckEndpoint[] = [
  {
    id: `${kind}-${part.device}`,
    kind,
    handler,
    device,
    label: flags.cpu ? `cpu, standing in for ${part.device}` : device,
    workers,
    gpusPerWorker,
    model,
  },
  { id: `${kind}-cpu`, kind, handler, device: "cpu", label: "cpu", workers: 1, model },
];

console.log(
  `gpu-check ${part.name}: ${part.handler} on ${device}${flags.cpu ? ` (standing in for ${part.device})` : ""} beside cpu; ${workers} ${device} worker(s)`,
);
console.log(
  `GPUs (nvidia-smi): ${gpus.length === 0 ? "none" : gpus.map((g) => `${g.index}: ${g.id} (${g.memoryMb ?? "?"} MiB)`).join(", ")}`,
);
for (const name of ["VK_DRIVER_FILES", "VK_ICD_FILENAMES", "GGML_VK_VISIBLE_DEVICES"])
  if (process.env[name]) console.log(`${name}=${process.env[name]}`);
if (!existsSync(model)) {
  console.error(`gpu-check: the model ${model} is missing: unpack the whole bundle`);
  process.exit(1);
}

const serverLog = join(out, `gpu-check-${part.name}-server.log`);
const started = performance.now();
const result = await runCheck({
  endpoints,
  settings,
  dir: join(ROOT, "run"),
  cli: join(ROOT, LAYOUT.serverCli),
  // The bundled server finds its dashboard's files relative to the working directory.
  cwd: join(ROOT, LAYOUT.serverDir),
  readyTimeoutS: 240,
  serverLog,
  onReady: () => {
    if (gpus.length === 0) return;
    console.log("\nnvidia-smi with the workers loaded, before the jobs:");
    const r = Bun.spawnSync(["nvidia-smi"], { stdout: "pipe", stderr: "pipe" });
    console.log(r.stdout.toString() + r.stderr.toString());
  },
});
if (!result.ok) {
  console.error(`\ngpu-check ${part.name}: ${result.error}`);
  const lines = existsSync(serverLog) ? readFileSync(serverLog, "utf8").trimEnd().split("\n") : [];
  console.error(
    `\nthe server's log, last ${Math.min(40, lines.length)} of ${lines.length} lines (all of it: ${serverLog}):\n${lines.slice(-40).join("\n") || result.serverOutput || "(the server wrote nothing)"}`,
  );
}
console.log(
  `\ngpu-check ${part.name}: ${result.ok ? "passed" : "FAILED"} in ${((performance.now() - started) / 1000).toFixed(1)} s; the server's log is ${serverLog}`,
);
process.exit(result.ok ? 0 : 1);
