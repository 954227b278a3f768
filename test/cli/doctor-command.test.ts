import { describe, expect, test } from "bun:test";
import { dlopen } from "bun:ffi";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { INSTALL_HINTS } from "../../runtime/cli/doctor-command.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

/** A function each library exports. */
const SYMBOL: Record<string, string> = {
  "libcudart.so.12": "cudaRuntimeGetVersion",
  "libcublas.so.12": "cublasCreate_v2",
  "libcudnn.so.9": "cudnnGetVersion",
  "libcudart.so.13": "cudaRuntimeGetVersion",
  "libcublas.so.13": "cublasCreate_v2",
  "libvulkan.so.1": "vkGetInstanceProcAddr",
};

/** Whether the dynamic loader finds and loads `lib` here. */
function loads(lib: string): boolean {
  try {
    dlopen(lib, { [SYMBOL[lib]!]: { args: [], returns: "void" } }).close();
    return true;
  } catch {
    return false;
  }
}

describe("spool doctor", () => {
  test("reports devices, every library, each handler's devices and, for what is missing, the command that adds it", async () => {
    const proc = Bun.spawn([process.execPath, CLI, "doctor"], { stdout: "pipe", stderr: "pipe" });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    for (const section of [
      "Devices",
      "Libraries (loaded with dlopen)",
      "Image handler (onnxruntime-node): devices for options.device",
      "Text handler (node-llama-cpp): devices for options.device",
    ]) {
      expect(out).toContain(`\n${section}\n`);
    }
    // the CPU provider is bundled: it always runs
    expect(out).toContain("  ok    cpu     runs a test graph");
    // Each library is ok exactly where this machine's loader finds it.
    for (const lib of Object.keys(SYMBOL)) {
      expect(out).toMatch(new RegExp(`\\n  ${loads(lib) ? "ok" : "--"}    ${lib.replaceAll(".", "\\.")} `));
    }
    const ortBin = join(
      dirname(createRequire(import.meta.url).resolve("onnxruntime-node/package.json")),
      "bin/napi-v6",
      process.platform,
      process.arch,
    );
    if (!existsSync(join(ortBin, "libonnxruntime_providers_cuda.so"))) {
      expect(out).toContain("--    cuda    the CUDA provider is not installed");
      expect(out).toContain(`To add what is missing:\n  ${INSTALL_HINTS.ortCuda}`);
    }
  }, 30_000);
});
