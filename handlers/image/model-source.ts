import { existsSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { downloadFromHub, isHubId } from "./hub-download.ts";
import { resolveLayout } from "./model-layout.ts";
import { VARIANTS, type ImageOptions, type Variant } from "./options.ts";

/**
 * The local folder of the endpoint's model: `options.model` as a folder, or as a hub id
 * downloaded once into the cache; with no model configured, the tiny demo model of the variant,
 * generated under the data dir on first use.
 */
export async function resolveModel(variant: Variant, options: ImageOptions): Promise<string> {
  const cacheDir = resolve(options.cacheDir ?? join(options.dataDir, "models"));
  let root: string;
  if (options.model === undefined) root = await demoModel(join(cacheDir, `tiny-flux-${VARIANTS[variant].tiny}`), VARIANTS[variant].tiny);
  else if (existsSync(options.model)) root = resolve(options.model);
  else if (isHubId(options.model)) root = await downloadFromHub(options.model, join(cacheDir, "hub", options.model.replace("/", "--")));
  else throw new Error(`model "${options.model}" is neither a folder on this machine nor a hub id (owner/name)`);
  resolveLayout(root); // a folder the pipeline cannot run fails here, naming its files, before any session loads
  return root;
}

/** Generates the demo model once; concurrent workers each write a temp folder and the first rename wins. */
async function demoModel(dir: string, variant: "dev" | "schnell"): Promise<string> {
  if (existsSync(join(dir, "model_index.json"))) return dir;
  const { makeTinyFlux } = await import("./tiny-model/make-tiny-flux.ts");
  const tmp = `${dir}.tmp-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  await makeTinyFlux(tmp, { variant });
  try {
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, "model_index.json"))) throw err;
  }
  return dir;
}
