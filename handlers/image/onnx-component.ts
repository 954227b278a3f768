import { existsSync } from "node:fs";
import { relative } from "node:path";
import * as ort from "onnxruntime-node";
import { isFloatType, toFloat32, toTensor, type HostData } from "./tensor-precision.ts";

/** Raised at load when a model folder's layout or precision is not one the pipeline runs. */
export class ModelFormatError extends Error {
  override name = "ModelFormatError";
}

/** One input or output of a graph, from the session's metadata. */
export interface Port {
  name: string;
  type: string;
  shape: ReadonlyArray<number | string>;
}

/** A host-side value for one input: data and dims (floats fp32, ids int64). */
export interface Feed {
  data: HostData;
  dims: readonly number[];
}

/**
 * One ONNX graph of the pipeline, with its inputs' and outputs' names and element types read
 * from the session: callers give and get fp32 (ids int64) and the conversion to what the graph
 * declares (fp16, int32) happens here, at the boundary.
 */
export class OnnxComponent {
  private constructor(
    /** The graph file, relative to the model folder (for messages). */
    readonly file: string,
    readonly session: ort.InferenceSession,
    readonly inputs: ReadonlyMap<string, Port>,
    readonly outputs: ReadonlyMap<string, Port>,
  ) {}

  static async load(root: string, path: string, options: ort.InferenceSession.SessionOptions): Promise<OnnxComponent> {
    const file = relative(root, path);
    if (!existsSync(path)) throw new ModelFormatError(`${file}: missing`);
    let session: ort.InferenceSession;
    try {
      session = await ort.InferenceSession.create(path, options);
    } catch (err) {
      const message = String((err as Error)?.message ?? err).split("\n")[0]!;
      if (/Unsupported data type: 16\b/.test(message)) {
        throw new ModelFormatError(
          `${file}: an input or output is bfloat16, which onnxruntime-node cannot pass in or out; supported at a graph's boundary: float32 and float16 (bf16 inside the graph is fine)`,
          { cause: err },
        );
      }
      throw new ModelFormatError(`${file}: onnxruntime cannot load it: ${message.slice(0, 400)}`, { cause: err });
    }
    const ports = (list: readonly ort.InferenceSession.ValueMetadata[]) =>
      new Map(
        list
          .filter((m) => m.isTensor)
          .map((m) => [
            m.name,
            {
              name: m.name,
              type: (m as ort.InferenceSession.TensorValueMetadata).type,
              shape: (m as ort.InferenceSession.TensorValueMetadata).shape,
            },
          ]),
      );
    return new OnnxComponent(file, session, ports(session.inputMetadata), ports(session.outputMetadata));
  }

  /** The input port `name`, or a ModelFormatError naming the file and what it has. */
  input(name: string): Port {
    const port = this.inputs.get(name);
    if (!port) throw new ModelFormatError(`${this.file}: no input "${name}" (it has ${[...this.inputs.keys()].join(", ")})`);
    return port;
  }

  /** The first output of `names` the graph has, else its only output; a ModelFormatError otherwise. */
  output(...names: string[]): Port {
    const port =
      names.map((n) => this.outputs.get(n)).find((p) => p) ?? (this.outputs.size === 1 ? [...this.outputs.values()][0] : undefined);
    if (!port)
      throw new ModelFormatError(`${this.file}: no output named ${names.join(" or ")} (it has ${[...this.outputs.keys()].join(", ")})`);
    return port;
  }

  /** Fails at load when a float port is neither fp32 nor fp16. */
  requireFloat(port: Port): Port {
    if (!isFloatType(port.type)) throw new ModelFormatError(`${this.file}: "${port.name}" is ${port.type}; supported: float32 or float16`);
    return port;
  }

  /**
   * Host feeds as tensors of each input's declared type. Inputs that stay the same across runs
   * (a job's text embeddings, fed to every denoising step) are converted once and given to each
   * run as `fixed`, instead of being rounded to fp16 and copied again per step.
   */
  tensors(feeds: Record<string, Feed>): Record<string, ort.Tensor> {
    const tensors: Record<string, ort.Tensor> = {};
    for (const [name, feed] of Object.entries(feeds)) tensors[name] = toTensor(this.input(name).type, feed.data, feed.dims);
    return tensors;
  }

  /**
   * Runs the graph on host feeds (converted to each input's declared type) and on `fixed`, tensors
   * made once by tensors(); returns the wanted outputs as fp32 with their dims.
   */
  async run(
    feeds: Record<string, Feed>,
    wanted: Port[],
    fixed: Record<string, ort.Tensor> = {},
  ): Promise<{ data: Float32Array; dims: readonly number[] }[]> {
    const out = await this.session.run(
      { ...fixed, ...this.tensors(feeds) },
      wanted.map((p) => p.name),
    );
    return wanted.map((p) => ({ data: toFloat32(out[p.name]!), dims: out[p.name]!.dims }));
  }

  release(): Promise<void> {
    return this.session.release();
  }
}
