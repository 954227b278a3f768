import { onnx } from "onnx-proto";

/** ONNX element types used here. */
export const FLOAT = 1;
export const INT64 = 7;
export const FLOAT16 = 10;

/** How a graph stores weights and what its float inputs and outputs are. */
export interface GraphPrecision {
  /** Weights and arithmetic. @default "fp32" */
  weights?: "fp32" | "fp16";
  /** Float inputs and outputs; fp32 around fp16 weights is what ONNX Runtime's fp16 optimizer writes with keep_io_types. @default weights */
  io?: "fp32" | "fp16";
  /** Keep weights in this file beside model.onnx (ONNX external data) instead of inside it. */
  externalData?: string;
}

type Dim = number | string;
type Attr = number | number[] | string | { floats: number[] } | { f: number };

/** Builds one ONNX graph (opset 18, IR 8) node by node; names are generated unless given. */
export class GraphBuilder {
  readonly #nodes: onnx.INodeProto[] = [];
  readonly #inits: onnx.ITensorProto[] = [];
  readonly #inputs: onnx.IValueInfoProto[] = [];
  readonly #outputs: onnx.IValueInfoProto[] = [];
  #count = 0;

  readonly #half: boolean;
  readonly #halfIo: boolean;

  constructor(
    readonly name: string,
    readonly precision: GraphPrecision = {},
  ) {
    this.#half = precision.weights === "fp16";
    this.#halfIo = (precision.io ?? precision.weights) === "fp16";
  }

  /** A graph input; a float one is cast to the graph's arithmetic type when its declared type differs. */
  input(name: string, elemType: number, dims: Dim[]): string {
    if (elemType !== FLOAT) {
      this.#inputs.push(valueInfo(name, elemType, dims));
      return name;
    }
    this.#inputs.push(valueInfo(name, this.#halfIo ? FLOAT16 : FLOAT, dims));
    return this.#half === this.#halfIo ? name : this.op("Cast", [name], { to: this.#half ? FLOAT16 : FLOAT });
  }

  /** Makes float value `x` the graph output `name` (cast to the declared io type when needed). */
  result(x: string, name: string, dims: Dim[]): void {
    if (this.#half === this.#halfIo) this.op("Identity", [x], {}, name);
    else this.op("Cast", [x], { to: this.#halfIo ? FLOAT16 : FLOAT }, name);
    this.#outputs.push(valueInfo(name, this.#halfIo ? FLOAT16 : FLOAT, dims));
  }

  /** A name not used before in this graph. */
  unique(prefix: string): string {
    return `${prefix}_${this.#count++}`;
  }

  /** A float initializer (a weight), stored in the graph's weight precision (or fp32 with `fp32`). */
  weight(name: string, dims: number[], data: Float32Array, fp32 = false): string {
    if (data.length !== dims.reduce((a, b) => a * b, 1)) throw new Error(`${name}: ${data.length} values for dims ${dims}`);
    const half = this.#half && !fp32;
    const stored = half ? Float16Array.from(data) : data;
    this.#inits.push({
      name,
      dims,
      dataType: half ? FLOAT16 : FLOAT,
      rawData: new Uint8Array(stored.buffer, stored.byteOffset, stored.byteLength),
    });
    return name;
  }

  /** `x` (in the graph's arithmetic type) as fp32, and `f` of it back: a part fp16 graphs keep in fp32, as diffusers does for timestep embeddings. */
  inFp32(x: string, f: (x32: string) => string): string {
    if (!this.#half) return f(x);
    return this.op("Cast", [f(this.op("Cast", [x], { to: FLOAT }))], { to: FLOAT16 });
  }

  /** An int64 constant initializer (shapes, axes, indices). */
  ints(values: number[], dims: number[] = [values.length]): string {
    const name = `const_${this.#count++}`;
    const data = new BigInt64Array(values.map((v) => BigInt(v)));
    this.#inits.push({ name, dims, dataType: INT64, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  /** A float scalar (or small vector) constant. */
  floats(values: number[], dims: number[] = []): string {
    return this.weight(`const_${this.#count++}`, dims, new Float32Array(values));
  }

  /** Adds a node; returns its (first) output name, which is `out` when given. */
  op(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, out?: string): string {
    const output = out ?? `${opType.toLowerCase()}_${this.#count++}`;
    this.#nodes.push({
      opType,
      input: inputs,
      output: [output],
      name: `${opType}_${this.#count++}`,
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return output;
  }

  /** Adds a node with several outputs. */
  opMulti(opType: string, inputs: string[], outputs: number, attrs: Record<string, Attr> = {}): string[] {
    const names = Array.from({ length: outputs }, () => `${opType.toLowerCase()}_${this.#count++}`);
    this.#nodes.push({
      opType,
      input: inputs,
      output: names,
      name: `${opType}_${this.#count++}`,
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return names;
  }

  /** The serialized model as files: model.onnx, plus the external weights file when the precision names one. */
  files(): Record<string, Uint8Array> {
    const external = this.precision.externalData;
    if (!external) return { "model.onnx": this.encode() };
    const parts: Uint8Array[] = [];
    let offset = 0;
    for (const init of this.#inits) {
      if (init.dataType === INT64) continue;
      const raw = init.rawData as Uint8Array;
      init.rawData = undefined;
      init.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
      init.externalData = [
        { key: "location", value: external },
        { key: "offset", value: String(offset) },
        { key: "length", value: String(raw.byteLength) },
      ];
      parts.push(raw);
      offset += raw.byteLength;
    }
    return { "model.onnx": this.encode(), [external]: Buffer.concat(parts) };
  }

  /** The serialized model (weights inside). */
  encode(): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion: 8,
      opsetImport: [{ domain: "", version: 18 }],
      producerName: "spool-tiny-flux",
      graph: { name: this.name, node: this.#nodes, initializer: this.#inits, input: this.#inputs, output: this.#outputs },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

function valueInfo(name: string, elemType: number, dims: Dim[]): onnx.IValueInfoProto {
  return {
    name,
    type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) } } },
  };
}

function attribute(name: string, v: Attr): onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === "string") return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: T.INTS, ints: v };
  if (typeof v === "object") return "f" in v ? { name, type: T.FLOAT, f: v.f } : { name, type: T.FLOATS, floats: v.floats };
  return Number.isInteger(v) ? { name, type: T.INT, i: v } : { name, type: T.FLOAT, f: v };
}
