import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const SCRIPT = join(ROOT, "scripts/gpu-bundle.ts");
const MIB = 1024 * 1024;
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Every file under `dir`, with its size. */
const files = (dir: string) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => ({ path: join(e.parentPath, e.name).slice(dir.length + 1), bytes: statSync(join(e.parentPath, e.name)).size }));

async function run(cmd: string[], opts: { cwd?: string; env?: Record<string, string> } = {}) {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd ?? ROOT,
    env: opts.env ?? { ...process.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

/** Whether this machine lets a test cut a command off the network (a network namespace of its own, loopback up). */
const netless = Bun.spawnSync(["unshare", "--net", "sh", "-c", "ip link set lo up"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

/** A PATH folder with every system command but xz: run.sh then unpacks with python3. */
function pathWithoutXz(dir: string): string {
  mkdirSync(dir);
  for (const folder of SYSTEM_PATH.split(":").filter(existsSync)) {
    for (const name of readdirSync(folder)) {
      if (/^(xz|unxz|xzcat|xzdec|lzma|unlzma)$/.test(name) || existsSync(join(dir, name))) continue;
      symlinkSync(join(folder, name), join(dir, name));
    }
  }
  return dir;
}

describe("the GPU check bundles", () => {
  const tmp = mkdtempSync(join(tmpdir(), "spool-gpu-bundle-test-"));
  const out = join(tmp, "gpu-bundle");
  let build: { code: number; out: string; err: string };

  // One build for every test here. Bun and the native libraries are compressed once per
  // machine (minutes) and kept in the build cache; later builds take seconds.
  beforeAll(async () => {
    build = await run([process.execPath, SCRIPT, "--out", out, "--no-debs"]);
  }, 900_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  test("each folder holds the archives and run.sh, and stays under 60 MiB with room for the loader packages", () => {
    expect({ code: build.code, err: build.err }).toEqual({ code: 0, err: "" });
    for (const part of ["image", "text"]) {
      const held = files(join(out, part));
      expect(held.map((f) => f.path).sort()).toEqual(["app.tar.xz", "bun.tar.xz", "native.tar.xz", "run.sh"]);
      const bytes = held.reduce((sum, f) => sum + f.bytes, 0);
      // The Vulkan loader's seven packages, left out here (no registry in tests), add 0.4 MiB.
      expect(bytes + MIB).toBeLessThan(60 * MIB);
      expect(build.out).toContain(`${join(out, part)}: ${(bytes / MIB).toFixed(1)} MiB (`);
    }
  });

  for (const [part, model, label, hideXz] of [
    ["image", "image-fast (tiny fp16, 256x256)", "cpu, standing in for webgpu", false],
    ["text", "text (tiny GGUF)", "cpu, standing in for vulkan", true],
  ] as const) {
    test(`${part}: run.sh --cpu unpacks the folder alone, under env -i, with no node_modules${netless ? " and no network" : ""}${hideXz ? " and no xz (python3 unpacks)" : ""}, and runs the check on both endpoints`, async () => {
      const carried = join(tmp, `carried-${part}`);
      cpSync(join(out, part), join(carried, part), { recursive: true });
      const unpacked = join(tmp, `unpacked-${part}`);
      const logs = join(tmp, `out-${part}`);
      const path = hideXz ? pathWithoutXz(join(tmp, `bin-${part}`)) : SYSTEM_PATH;
      const env = { PATH: path, OUT: logs, SPOOL_GPU_CHECK_DIR: unpacked };
      const script = ["bash", join(carried, part, "run.sh"), "--cpu", "--rounds", "1", "--tokens", "8"];
      const cmd = netless ? ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", ...script] : script;
      const r = await run(cmd, { cwd: carried, env });
      const log = readFileSync(join(logs, `gpu-check-${part}.log`), "utf8");
      expect({ code: r.code, said: log.includes(`gpu-check ${part}: passed`) }).toEqual({ code: 0, said: true });
      expect(log).toMatch(new RegExp(`unpacked into ${unpacked} in [0-9]+ s with ${hideXz ? "python3" : "xz"} `));
      expect(log).toMatch(new RegExp(`\\| ${part}-(webgpu|vulkan) \\| ${part}-(webgpu|vulkan)-[0-9a-f]+ \\| - \\| none seen \\| 1 \\|`));
      expect(log).toMatch(new RegExp(`\\| ${part}-cpu \\| ${part}-cpu-[0-9a-f]+ \\| - \\| none seen \\| 1 \\|`));
      for (const device of [label, "cpu"])
        expect(log).toMatch(new RegExp(`\\| ${model.replace(/[()]/g, "\\$&")} \\| ${device} \\| -?[0-9.]+ ms/(step|token) \\|`));
      expect(readdirSync(logs).sort()).toEqual([`gpu-check-${part}-server.log`, `gpu-check-${part}.log`]);
      // Nothing came from a node_modules: the unpacked tree has none, and neither has any folder above it.
      expect(files(unpacked).filter((f) => f.path.includes("node_modules"))).toEqual([]);
      const above = unpacked.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/") || "/");
      expect(above.filter((dir) => existsSync(join(dir, "node_modules")))).toEqual([]);
    }, 180_000);
  }

  test("a folder over the limit is refused and nothing is written", async () => {
    const refused = join(tmp, "refused");
    const r = await run([process.execPath, SCRIPT, "--out", refused, "--part", "text", "--no-debs", "--limit-mib", "10"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      new RegExp(`^gpu-bundle: ${join(refused, "text")} would be [0-9.]+ MiB, over the 10 MiB limit; nothing was written\n$`),
    );
    expect(readdirSync(refused)).toEqual([]);
  }, 300_000);
});
