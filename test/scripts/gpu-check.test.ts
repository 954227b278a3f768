import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const SCRIPT = resolve(import.meta.dir, "../../scripts/gpu-check.ts");

test("scripts/gpu-check.ts on a machine with no GPU says so and exits 0, building and starting nothing", async () => {
  // A PATH with no nvidia-smi on it: no GPU, whatever machine runs the test.
  const empty = mkdtempSync(join(tmpdir(), "spool-no-gpu-"));
  try {
    const proc = Bun.spawn([process.execPath, SCRIPT], {
      env: { PATH: empty, HOME: empty },
      stdout: "pipe",
      stderr: "pipe",
      stdin: "ignore",
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, out, err }).toEqual({
      code: 0,
      out: "gpu-check: no GPU here (nvidia-smi is missing or lists none); nothing to check\n",
      err: "",
    });
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});
