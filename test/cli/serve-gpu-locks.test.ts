import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fakeNvidiaSmi } from "../helpers/fake-nvidia-smi.ts";
import { spawnProcess } from "../helpers/spawned.ts";
import { until } from "../helpers/until.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");
const GPU = resolve(import.meta.dir, "../fixtures/gpu-fixture.ts");
const CARD = "GPU-4f3e2d1c-0000-4000-8000-00000000beef";

test("two spool serve on one host with one card: the second waits for it, and takes it once the first is killed with SIGKILL", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spool-gpu-locks-"));
  using smi = fakeNvidiaSmi(`${CARD}, 0, 24576\n`);
  try {
    const config = join(dir, "spool.toml");
    writeFileSync(
      config,
      `[server]\nscaleIntervalMs = 50\ngpuLockDir = "${join(dir, "locks")}"\n\n[endpoints.ep]\nhandler = "${GPU}"\ngpusPerWorker = 1\nworkersMin = 1\nworkersMax = 1\n`,
    );
    // The fixture handler writes the CUDA_VISIBLE_DEVICES its worker process got into its endpoint's folder.
    const env = { ...process.env, PATH: smi.path };
    const seen = join(dir, "a", "endpoints", "ep", "gpu-seen");
    const serve = (data: string) =>
      spawnProcess([process.execPath, CLI, "serve", "--port", "0", "--data", join(dir, data), "--config", config], { env });
    const started = /"msg":"started worker".*"gpus":\["([^"]+)"\]/;

    await using first = serve("a");
    expect((await first.waitFor(started))[1]).toBe(CARD);
    const worker = await until(() => existsSync(seen) && readdirSync(seen)[0], "the first server's worker to report its GPUs");
    expect(JSON.parse(readFileSync(join(seen, worker), "utf8")).cuda).toBe(CARD);

    await using second = serve("b");
    // Whichever the second server does first: wait for the card, or (wrongly) start a worker on it.
    const [decision] = await second.waitFor(/^\{.*"msg":"(scale-up waits for a free GPU|started worker)".*$/);
    expect(JSON.parse(decision)).toMatchObject({ msg: "scale-up waits for a free GPU", gpus: 1, free: 1, elsewhere: 1 });

    first.proc.kill("SIGKILL");
    await first.proc.exited;
    expect((await second.waitFor(started))[1]).toBe(CARD);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
