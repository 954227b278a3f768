/**
 * The measuring part of the GPU checks (scripts/gpu-check.ts, scripts/gpu-bundle/check.ts): a
 * local `spool serve` whose endpoints run worker executables on a GPU device and on the CPU, the
 * same jobs on each, and what every worker was given and ran on.
 */
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { killGroup } from "../bench/harness/processes.ts";
import { bearer, getHealth } from "../bench/harness/spool-http.ts";
import { startSpool, type SpoolProcess } from "../bench/harness/spool-process.ts";
import { printTable } from "../bench/harness/table.ts";
import { cardMemory, computeApps, tableApps, withChildren, workerPids, type CardMemory } from "./nvidia.ts";

/** One endpoint of the check: a worker executable, the device in its options, its workers. */
export interface CheckEndpoint {
  id: string;
  kind: "image" | "text";
  /** A worker executable (`spool build` binary, or a script that starts one). */
  handler: string;
  /** `options.device`. */
  device: string;
  /** The device as the tables name it ("webgpu", "cpu", "cpu, standing in for webgpu"). */
  label: string;
  workers: number;
  /** Unset: the endpoint's default (1 on cuda, else 0). */
  gpusPerWorker?: number;
  /** The image model folder or the GGUF file. */
  model: string;
}

export interface CheckSettings {
  rounds: number;
  /** Denoising steps of the long image job (2 to 8). */
  steps: number;
  /** max_tokens of each text job. */
  tokens: number;
}

export interface CheckRun {
  endpoints: CheckEndpoint[];
  settings: CheckSettings;
  /** A folder the check may fill (data dir, config). */
  dir: string;
  /** The spool CLI entry the server runs (`runtime/cli.ts`, or a bundled `cli.js`); default: this checkout's. */
  cli?: string;
  /** The server's working directory. */
  cwd?: string;
  /** How long the workers may take to load their models. @default 180 */
  readyTimeoutS?: number;
  /** Called with the server once its workers are idle, before any job: a moment to look at the cards. */
  onReady?: (server: SpoolProcess) => void;
  /** A file that gets the server's whole error output (its log and its workers'), line by line. */
  serverLog?: string;
}

/** Whether a check passed, and the server's output when it did not. */
export interface CheckResult {
  ok: boolean;
  error?: string;
  serverOutput?: string;
}

function endpointToml(ep: CheckEndpoint): string {
  const options =
    ep.kind === "image"
      ? `model = ${JSON.stringify(ep.model)}\nmaxSequenceLength = 256\n`
      : `model = ${JSON.stringify(ep.model)}\nsequences = 1\n`;
  return (
    `[endpoints.${ep.id}]\nhandler = ${JSON.stringify(ep.handler)}\nworkersMin = ${ep.workers}\nworkersMax = ${ep.workers}\nidleTimeout = 3600\n` +
    `scalerType = "REQUEST_COUNT"\nscalerValue = 1\n${ep.gpusPerWorker === undefined ? "" : `gpusPerWorker = ${ep.gpusPerWorker}\n`}` +
    `[endpoints.${ep.id}.options]\ndevice = "${ep.device}"\n${options}\n`
  );
}

/** The config of a check: the scaler ticks fast, so workers start at once. */
export const checkConfig = (endpoints: CheckEndpoint[]) => `[server]\nscaleIntervalMs = 200\n\n${endpoints.map(endpointToml).join("")}`;

/** What the server's log (its workers' error output included) says about each worker. */
class LogWatch {
  readonly started = new Map<string, { endpoint: string; gpus: string }>();
  readonly notes: string[] = [];
  /** The first failed start of each endpoint, as the server logged it. */
  readonly failedStarts = new Map<string, string>();

  line = (line: string): void => {
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line);
    } catch {
      return;
    }
    if (entry.msg === "started worker")
      this.started.set(String(entry.workerId), {
        endpoint: String(entry.endpointId),
        gpus: Array.isArray(entry.gpus) ? entry.gpus.join(",") : "-",
      });
    if (entry.msg === "text model layers placed") {
      const names = Array.isArray(entry.gpus) && entry.gpus.length > 0 ? ` (${entry.gpus.join(", ")})` : "";
      this.notes.push(`text: ${entry.gpuLayers} of ${entry.totalLayers} layers on ${entry.device}${names}`);
    }
    if (/failed to start/.test(String(entry.msg)) && !this.failedStarts.has(String(entry.endpointId)))
      this.failedStarts.set(String(entry.endpointId), String(entry.msg));
    if (entry.level === "error") this.notes.push(`log: ${line}`);
  };
}

/**
 * Waits until all of an endpoint's workers are idle; throws at the first worker that failed to
 * start (a device the machine lacks fails every start the same way) or after `timeoutS`.
 */
async function waitForWorkers(server: SpoolProcess, ep: CheckEndpoint, watch: LogWatch, timeoutS: number): Promise<void> {
  const deadline = performance.now() + timeoutS * 1000;
  for (;;) {
    const failed = watch.failedStarts.get(ep.id);
    if (failed) throw new Error(`${ep.id} (device ${ep.device}): ${failed}`);
    if ((await getHealth(server, ep.id)).workers.idle >= ep.workers) return;
    if (performance.now() > deadline) throw new Error(`${ep.id}: ${ep.workers} worker(s) not idle within ${timeoutS} s`);
    await Bun.sleep(100);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs the check: starts the server, times the jobs, prints the tables. Never throws; the server is gone when it returns. */
export async function runCheck(run: CheckRun): Promise<CheckResult> {
  const watch = new LogWatch();
  let server: SpoolProcess | undefined;
  // The server leads a process group of its own, which a signal to this process would not reach.
  const stop = () => {
    if (server) killGroup(server.proc.pid, "SIGKILL");
    process.exit(130);
  };
  process.once("SIGTERM", stop).once("SIGINT", stop);
  try {
    mkdirSync(join(run.dir, "data"), { recursive: true });
    writeFileSync(join(run.dir, "spool.toml"), checkConfig(run.endpoints));
    const log = run.serverLog;
    const onStderrLine = (line: string) => {
      watch.line(line);
      if (log) appendFileSync(log, `${line}\n`);
    };
    server = await startSpool({
      name: "spool",
      cli: run.cli,
      cwd: run.cwd,
      dataDir: join(run.dir, "data"),
      configPath: join(run.dir, "spool.toml"),
      detached: true,
      readyTimeoutMs: 60_000,
      onStderrLine,
    });
    for (const ep of run.endpoints) await waitForWorkers(server, ep, watch, run.readyTimeoutS ?? 180);
    run.onReady?.(server);
    await measure(server, run, watch);
    return { ok: true };
  } catch (err) {
    for (const n of new Set(watch.notes)) console.log(n);
    return { ok: false, error: (err as Error).stack ?? String(err), serverOutput: server?.output() };
  } finally {
    process.off("SIGTERM", stop).off("SIGINT", stop);
    if (server) killGroup(server.proc.pid, "SIGKILL");
  }
}

async function measure(server: SpoolProcess, run: CheckRun, watch: LogWatch): Promise<void> {
  const { rounds, steps, tokens } = run.settings;
  const seen = new Map<string, Set<string>>();
  const peak = new Map<string, CardMemory>();
  const perWorker = new Map<string, number[]>();
  const rows: string[][] = [];
  const count = (workerId: string, ms: number) => perWorker.set(workerId, [...(perWorker.get(workerId) ?? []), ms]);
  const jobs = (ep: CheckEndpoint, input: unknown) => parallel(server, ep, input, seen, peak);
  const imageInput = (n: number) => ({ prompt: "a lighthouse at dusk", width: 256, height: 256, num_inference_steps: n, seed: 1 });
  const textInput = (max: number) => ({ messages: [{ role: "user", content: "Tell me a story" }], sampling_params: { max_tokens: max } });

  for (const ep of run.endpoints.filter((e) => e.kind === "image")) {
    await jobs(ep, imageInput(1)); // warm-up: the first run at a shape allocates
    const one: number[] = [];
    const many: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const j of await jobs(ep, imageInput(1))) one.push(j.ms);
      for (const j of await jobs(ep, imageInput(steps))) {
        many.push(j.ms);
        count(j.workerId, j.ms);
      }
    }
    rows.push([
      "image-fast (tiny fp16, 256x256)",
      ep.label,
      `${((median(many) - median(one)) / (steps - 1)).toFixed(1)} ms/step`,
      `${median(many)} ms for ${steps} steps`,
    ]);
  }
  for (const ep of run.endpoints.filter((e) => e.kind === "text")) {
    await jobs(ep, textInput(4));
    const perToken: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const j of await jobs(ep, textInput(tokens))) {
        const made = (j.output as { usage?: { output?: number } }[]).reduce((sum, chunk) => sum + (chunk.usage?.output ?? 0), 0) || tokens;
        perToken.push(j.ms / made);
        count(j.workerId, j.ms);
      }
    }
    rows.push(["text (tiny GGUF)", ep.label, `${median(perToken).toFixed(2)} ms/token`, `up to ${tokens} tokens a job, prompt included`]);
  }

  console.log("\nworkers:");
  printTable(
    ["endpoint", "worker", "GPUs given (CUDA_VISIBLE_DEVICES)", "on the GPU (nvidia-smi)", "jobs"],
    "lllll",
    [...watch.started].map(([id, w]) => [
      w.endpoint,
      id,
      w.gpus,
      [...(seen.get(id) ?? [])].join(", ") || "none seen",
      String(perWorker.get(id)?.length ?? 0),
    ]),
  );
  console.log(`\ntimings (medians of ${rounds} rounds; server-measured execution time):`);
  printTable(["model", "device", "per step / token", "job"], "llrl", rows);
  if (peak.size > 0) {
    console.log("\ncard memory while the jobs ran (nvidia-smi):");
    printTable(
      ["GPU", "name", "most in use", "total"],
      "llrr",
      [...peak.values()].map((c) => [c.index, c.name, `${c.usedMb} MiB`, `${c.totalMb} MiB`]),
    );
  }
  for (const n of new Set(watch.notes)) console.log(n);
}

/** A runsync job; its server-measured executionTime (ms), worker and output. */
async function job(server: SpoolProcess, endpoint: string, input: unknown): Promise<{ ms: number; workerId: string; output: unknown }> {
  const res = await fetch(`${server.url}/v2/${endpoint}/runsync?wait=300000`, {
    method: "POST",
    headers: bearer(server.key),
    body: JSON.stringify({ input }),
  });
  const body = (await res.json()) as { status?: string; executionTime: number; workerId: string; output: unknown };
  if (body.status !== "COMPLETED") throw new Error(`${endpoint}: job answered ${JSON.stringify(body)}`);
  return { ms: body.executionTime, workerId: body.workerId, output: body.output };
}

/**
 * Runs one copy of a job per worker at once, noting meanwhile the GPUs nvidia-smi shows each
 * worker's process on and the most memory each card had in use.
 */
async function parallel(
  server: SpoolProcess,
  ep: CheckEndpoint,
  input: unknown,
  seen: Map<string, Set<string>>,
  peak: Map<string, CardMemory>,
) {
  let running = true;
  const sample = (async () => {
    while (running) {
      // Compute contexts by card UUID (as workers are given cards); Vulkan ones only in the table.
      const apps = [...computeApps().map((a) => ({ ...a, type: "C" })), ...tableApps().filter((a) => a.type !== "C")];
      for (const [workerId, pid] of workerPids()) {
        const tree = new Set(withChildren(pid));
        for (const a of apps)
          if (tree.has(a.pid)) seen.set(workerId, (seen.get(workerId) ?? new Set()).add(`${a.gpu} (${a.usedMb} MiB, ${a.type})`));
      }
      for (const card of cardMemory()) if (card.usedMb > (peak.get(card.index)?.usedMb ?? -1)) peak.set(card.index, card);
      await Bun.sleep(200);
    }
  })();
  try {
    return await Promise.all(Array.from({ length: ep.workers }, () => job(server, ep.id, input)));
  } finally {
    running = false;
    await sample;
  }
}
