import { checkDevice } from "./device.ts";
import { resolveModel } from "./model-source.ts";
import type { ImageOptions, Variant } from "./options.ts";
import { FluxPipeline } from "./pipeline.ts";

/** Startup of an image worker: proves the device, finds (or makes) the model, loads it. */
export async function loadImageModel(variant: Variant, options: ImageOptions): Promise<FluxPipeline> {
  await checkDevice(options.device);
  const root = await resolveModel(variant, options);
  return FluxPipeline.load(root, { device: options.device, maxSequenceLength: options.maxSequenceLength });
}
