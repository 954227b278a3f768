import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTinyFlux } from "../../../handlers/image/tiny-model/make-tiny-flux.ts";

export interface TinyModels {
  dir: string;
  /** dev-like: guidance embedding, dynamic shift. */
  dev: string;
  /** schnell-like. */
  schnell: string;
  remove(): void;
}

/** Both tiny models written into a fresh temp dir (for a test file's beforeAll). */
export async function makeTinyModels(): Promise<TinyModels> {
  const dir = mkdtempSync(join(tmpdir(), "spool-tiny-flux-"));
  const dev = join(dir, "dev");
  const schnell = join(dir, "schnell");
  await Promise.all([makeTinyFlux(dev, { variant: "dev" }), makeTinyFlux(schnell, { variant: "schnell" })]);
  return { dir, dev, schnell, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Handler options for a variant's endpoint on its tiny model. */
export const tinyOptions = (models: TinyModels, variant: "quality" | "fast", extra: Record<string, unknown> = {}) => ({
  model: variant === "quality" ? models.dev : models.schnell,
  device: "cpu",
  price: variant === "quality" ? 0.02 : 0.0024,
  maxSequenceLength: variant === "quality" ? 512 : 256,
  dataDir: models.dir,
  ...extra,
});
