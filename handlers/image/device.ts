import * as ort from "onnxruntime-node";
import type { Device } from "./options.ts";

/** Raised at worker startup when the configured device cannot run; the worker does not start. */
export class DeviceUnavailableError extends Error {
  override name = "DeviceUnavailableError";
}

const HINTS: Record<Device, string> = {
  cuda: "the CUDA provider needs an NVIDIA GPU with CUDA 12 + cuDNN 9 and onnxruntime-node's CUDA binaries (ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node); `spool doctor` lists what this machine lacks",
  webgpu: "WebGPU needs libvulkan.so.1 and a GPU driver's Vulkan ICD",
  cpu: "the CPU provider is bundled with onnxruntime-node",
};

/** ONNX Runtime's name of a device's execution provider. */
export const executionProvider = (device: Device) => device;

/**
 * Proves that `device` runs ONNX Runtime sessions by running a one-node graph on it, so that a
 * missing GPU is a startup error naming the device, never a silent fallback to the CPU.
 */
export async function checkDevice(device: Device): Promise<void> {
  const supported = ort.listSupportedBackends().map((b) => b.name);
  if (!supported.includes(device)) {
    throw new DeviceUnavailableError(
      `device "${device}" is not available: this onnxruntime-node build has no ${device} provider (it has ${supported.join(", ")}); ${HINTS[device]}`,
    );
  }
  try {
    const session = await ort.InferenceSession.create(probeModel(), {
      executionProviders: [executionProvider(device)],
      logSeverityLevel: 4,
    });
    await session.run({ x: new ort.Tensor("float32", new Float32Array([-1, 1]), [2]) });
    await session.release();
  } catch (err) {
    // The first line whole: ONNX Runtime puts the reason (no adapter, which feature is missing) at its end.
    const reason = String((err as Error)?.message ?? err)
      .split("\n")[0]!
      .slice(0, 2000);
    throw new DeviceUnavailableError(
      `device "${device}" is not available: ${reason}; ${HINTS[device]}. Set the endpoint's options.device to one this machine has (e.g. "cpu").`,
      { cause: err },
    );
  }
}

/** A one-node ONNX model (Relu on float32[2]; opset 18, IR 8), serialized. */
const PROBE_MODEL = "CAg6NwoMCgF4EgF5IgRSZWx1EgVwcm9iZVoPCgF4EgoKCAgBEgQKAggCYg8KAXkSCgoICAESBAoCCAJCBAoAEBI=";
const probeModel = () => Uint8Array.from(Buffer.from(PROBE_MODEL, "base64"));
