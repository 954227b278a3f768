#!/usr/bin/env bun
/**
 * Model binary benchmark: the image-fast and text handlers built with `spool build` into single
 * files, against the same handlers run from source (`bun runtime/cli.ts worker <handler>`, the
 * reference).
 *
 * Per model it prints the binary's size and what it embeds, then, runs interleaved:
 *   - first start: spawn -> first GET job-take with an empty cache (extraction included);
 *   - second start: the same with the cache the first start left;
 *   - source: the handler from source, same model files;
 * and, against a real `spool serve`, spawn -> the first image (a 256x256 /runsync submitted at
 * spawn) or the first token (an OpenAI-compatible stream opened at spawn), binary and source.
 * Workers run supervised (as users run them) with PATH, HOME and SPOOL_CACHE_DIR only, the
 * binary from a folder with no node_modules. The tiny models are generated once beforehand.
 *
 *   bun scripts/bench/model-binaries.ts [--runs 5]
 */
import { copyFileSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchCli } from "./harness/cli.ts";
import { exitCleanup } from "./harness/exit-cleanup.ts";
import { machine, machineLine } from "./harness/machine.ts";
import { drain, outputTail } from "./harness/pipes.ts";
import { killGroup, stopGroup } from "./harness/processes.ts";
import { REPO_ROOT, startSpool, type SpoolProcess } from "./harness/spool-process.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";
import { makeTempDir, removeDir } from "./harness/temp-dir.ts";
import { startRecorder, WORKER_START_ENDPOINT } from "./harness/worker-start-recorder.ts";

const cli = benchCli("bench-model-binaries", "usage: bun scripts/bench/model-binaries.ts [--runs 5]");
const { values: opts } = parseArgs({
  args: Bun.argv.slice(2),
  options: { runs: { type: "string", default: "5" }, help: { type: "boolean", short: "h" } },
});
if (opts.help) cli.help();
const RUNS = cli.int("runs", opts.runs);
const RUN_TIMEOUT_MS = 60_000;

interface Model {
  name: string;
  handler: string;
  /** A job for `--input` (to generate the tiny model once) and for /runsync. */
  input: unknown;
}
const MODELS: Model[] = [
  {
    name: "image-fast",
    handler: "handlers/image/fast.ts",
    input: { prompt: "a lighthouse", width: 256, height: 256, seed: 1, image_format: "png" },
  },
  {
    name: "text",
    handler: "handlers/text/handler.ts",
    input: { messages: [{ role: "user", content: "Hi" }], sampling_params: { max_tokens: 4 } },
  },
];

const tmpRoot = makeTempDir("spool-bench-models-");
const live = new Set<Bun.Subprocess>();
const recorder = startRecorder(2_000);
let server: SpoolProcess | undefined;
const cleanup = exitCleanup(async () => {
  for (const p of live) killGroup(p.pid, "SIGKILL");
  if (server) killGroup(server.proc.pid, "SIGKILL");
  recorder.stop();
  removeDir(tmpRoot);
});

const f2 = (ms: number) => (ms / 1000).toFixed(2);
const f1 = (n: number) => n.toFixed(1);

/** Spawns a worker in its own process group; `until` resolves when the measured moment is reached. */
async function timed(cmd: string[], cwd: string, env: Record<string, string>, until: (t0: number) => Promise<number>): Promise<number> {
  const out = outputTail(8_192);
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { cwd, env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  live.add(proc);
  void drain(proc.stdout, out.add);
  void drain(proc.stderr, out.add);
  try {
    let timer: Timer | undefined;
    const at = await Promise.race([
      until(t0),
      proc.exited.then((code) => Promise.reject(new Error(`worker exited with ${code}`))),
      new Promise<never>(
        (_, reject) => (timer = setTimeout(() => reject(new Error(`not done after ${RUN_TIMEOUT_MS / 1000} s`)), RUN_TIMEOUT_MS)),
      ),
    ]).finally(() => clearTimeout(timer));
    return at - t0;
  } catch (e) {
    throw new Error(`${cmd.join(" ")}: ${(e as Error).message}\n--- worker output (tail)\n${out.text()}`);
  } finally {
    await stopGroup(proc, { killAfterMs: 3_000, pollMs: 5, afterKillMs: 50 }).catch(() => killGroup(proc.pid, "SIGKILL"));
    live.delete(proc);
  }
}

/** spawn -> first GET job-take at the recording server. */
async function toFirstTake(cmd: string[], cwd: string, env: Record<string, string>): Promise<number> {
  const run = recorder.arm();
  try {
    return await timed(cmd, cwd, env, () => run.firstTake.promise);
  } finally {
    recorder.disarm(run);
  }
}

/** spawn -> the first image (runsync answered) or the first streamed token, against the real server. */
async function toFirstOutput(model: Model, cmd: string[], cwd: string, env: Record<string, string>): Promise<number> {
  const srv = server!;
  const headers = { authorization: `Bearer ${srv.key}`, "content-type": "application/json" };
  return timed(cmd, cwd, env, async () => {
    if (model.name === "text") {
      const res = await fetch(`${srv.url}/v2/text/openai/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Hi" }], max_tokens: 16, stream: true }),
      });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended with no token: ${text.slice(0, 500)}`);
        text += decoder.decode(value, { stream: true });
        if (/"content":"[^"]/.test(text)) {
          const at = performance.now();
          void reader.cancel();
          return at;
        }
      }
    }
    const res = await fetch(`${srv.url}/v2/${model.name}/runsync?wait=60000`, {
      method: "POST",
      headers,
      body: JSON.stringify({ input: model.input }),
    });
    const body = (await res.json()) as { status?: string };
    if (body.status !== "COMPLETED") throw new Error(`runsync answered ${JSON.stringify(body).slice(0, 500)}`);
    return performance.now();
  });
}

async function main(): Promise<void> {
  const info = machineLine(machine(), { load: true });
  console.log(`spool model binary benchmark: ${RUNS} runs per variant; workers supervised, env PATH/HOME/SPOOL_CACHE_DIR only`);
  console.log(`machine: ${info}\n`);
  const config = join(tmpRoot, "spool.toml");
  writeFileSync(
    config,
    `[endpoints.image-fast]\nworkersMax = 0\n[endpoints.text]\nworkersMax = 0\nhandler = ${JSON.stringify(join(REPO_ROOT, "handlers/text/handler.ts"))}\n` +
      `[endpoints.text.rateLimits.requests]\nrequests = 1000000\n`,
  );
  server = await startSpool({ name: "spool", dataDir: join(tmpRoot, "server-data"), configPath: config, detached: true });

  const sizeRows: string[][] = [];
  const startRows: string[][] = [];
  const outputRows: string[][] = [];
  for (const model of MODELS) {
    const dir = join(tmpRoot, model.name);
    mkdirSync(dir, { recursive: true });
    const binary = join(dir, model.name);
    const t = performance.now();
    const build = Bun.spawnSync(
      [process.execPath, "runtime/cli.ts", "build", model.handler, "--outfile", join(tmpRoot, "build", model.name)],
      { cwd: REPO_ROOT },
    );
    const buildS = (performance.now() - t) / 1000;
    const buildOut = build.stdout.toString();
    if (build.exitCode !== 0) throw new Error(`spool build ${model.handler} failed\n${buildOut}${build.stderr}`);
    copyFileSync(join(tmpRoot, "build", model.name), binary);
    Bun.spawnSync(["chmod", "+x", binary]);
    const native = /native parts: (\d+) files, ([\d.]+) MB/.exec(buildOut);
    sizeRows.push([model.name, f1(statSync(binary).size / 1e6), native ? native[2]! : "0", native ? native[1]! : "0", f1(buildS)]);

    // The tiny model, generated once into the folder's data dir (not part of any timing).
    const warmCache = join(dir, "cache-warm");
    const env = (cache: string) => ({ PATH: "/usr/bin:/bin", HOME: dir, SPOOL_CACHE_DIR: cache, SPOOL_DATA_DIR: join(dir, ".data") });
    const once = Bun.spawnSync([binary, "--input", JSON.stringify(model.input)], { cwd: dir, env: env(warmCache) });
    if (once.exitCode !== 0) throw new Error(`${model.name} --input failed\n${once.stderr}`);

    const takeArgs = ["--url", recorder.url, "--endpoint", WORKER_START_ENDPOINT, "--api-key", "k"];
    const sourceCmd = (args: string[]) => [
      process.execPath,
      join(REPO_ROOT, "runtime/cli.ts"),
      "worker",
      join(REPO_ROOT, model.handler),
      ...args,
    ];
    const first: number[] = [];
    const second: number[] = [];
    const source: number[] = [];
    for (let i = 0; i <= RUNS; i++) {
      const fresh = join(dir, `cache-fresh-${i}`);
      const a = await toFirstTake([binary, ...takeArgs], dir, env(fresh));
      rmSync(fresh, { recursive: true, force: true });
      const b = await toFirstTake([binary, ...takeArgs], dir, env(warmCache));
      const c = await toFirstTake(sourceCmd(takeArgs), dir, env(warmCache));
      if (i === 0) continue; // warm-up round: page cache, bun's transpiler cache
      first.push(a);
      second.push(b);
      source.push(c);
    }
    const s = (xs: number[]) => summarize(xs);
    const ref = s(source).p50;
    for (const [label, xs] of [
      ["binary, first start (extracts)", first],
      ["binary, second start (cache reused)", second],
      ["source (reference)", source],
    ] as const) {
      startRows.push([model.name, label, f2(s(xs).p50), f2(s(xs).max), (s(xs).p50 / ref).toFixed(2)]);
    }

    const srvArgs = ["--url", server.url, "--endpoint", model.name, "--api-key", server.key];
    const binOut: number[] = [];
    const srcOut: number[] = [];
    for (let i = 0; i < Math.min(RUNS, 3); i++) {
      binOut.push(await toFirstOutput(model, [binary, ...srvArgs], dir, env(warmCache)));
      srcOut.push(await toFirstOutput(model, sourceCmd(srvArgs), dir, env(warmCache)));
    }
    const what = model.name === "text" ? "first token (OpenAI stream)" : "first image (256x256 runsync)";
    outputRows.push([model.name, what, f2(s(binOut).p50), f2(s(srcOut).p50), (s(binOut).p50 / s(srcOut).p50).toFixed(2)]);
  }

  // A GPU build's size (it is not started: this machine has no GPU to run it on).
  const t = performance.now();
  const vulkanOut = join(tmpRoot, "build", "text-vulkan");
  const vulkan = Bun.spawnSync(
    [process.execPath, "runtime/cli.ts", "build", "handlers/text/handler.ts", "--gpu", "vulkan", "--outfile", vulkanOut],
    { cwd: REPO_ROOT },
  );
  if (vulkan.exitCode !== 0) throw new Error(`spool build --gpu vulkan failed\n${vulkan.stdout}${vulkan.stderr}`);
  const vNative = /native parts: (\d+) files, ([\d.]+) MB/.exec(vulkan.stdout.toString());
  sizeRows.push([
    "text --gpu vulkan (not started)",
    f1(statSync(vulkanOut).size / 1e6),
    vNative?.[2] ?? "0",
    vNative?.[1] ?? "0",
    f1((performance.now() - t) / 1000),
  ]);

  printTable(["model binary", "size MB", "embedded native MB", "native files", "build s"], "lrrrr", sizeRows);
  console.log("");
  printTable(["model", "spawn -> first job-take", "p50 s", "max s", "vs source"], "llrrr", startRows);
  console.log("");
  printTable(["model", "spawn -> ", "binary p50 s", "source p50 s", "binary/source"], "llrrr", outputRows);
  console.log(`\nmachine: ${info}`);
}

await main().finally(() => cleanup.run());
