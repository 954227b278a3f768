import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NVIDIA_SMI_QUERY } from "../../runtime/config/gpus.ts";

export interface FakeNvidiaSmi extends Disposable {
  /** The folder holding it: put it first on a PATH. */
  dir: string;
  /** process.env's PATH with the folder first. */
  path: string;
}

/**
 * An `nvidia-smi` that answers spool's GPU query with `csv` (lines of `uuid, index, MiB`, as the
 * real one prints them) and fails on any other arguments, so a test sees the query asked too.
 */
export function fakeNvidiaSmi(csv: string): FakeNvidiaSmi {
  const dir = mkdtempSync(join(tmpdir(), "spool-nvidia-smi-"));
  const expected = NVIDIA_SMI_QUERY.slice(1).join(" ");
  const script = `#!/bin/sh\n[ "$*" = "${expected}" ] || { echo "unexpected query: $*" >&2; exit 9; }\ncat <<'EOF'\n${csv}EOF\n`;
  writeFileSync(join(dir, "nvidia-smi"), script);
  chmodSync(join(dir, "nvidia-smi"), 0o755);
  return { dir, path: `${dir}:${process.env.PATH ?? ""}`, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Three cards of different memory whose UUIDs do not sort in index order (as on a real host: a
 * UUID says nothing of where the card sits).
 */
export const MIXED_CARDS =
  "GPU-c3a9e0f1-0000-4000-8000-000000000003, 0, 24576\nGPU-1b7d2c44-0000-4000-8000-000000000001, 1, 81559\nGPU-8e5f6a10-0000-4000-8000-000000000002, 2, 40960\n";
