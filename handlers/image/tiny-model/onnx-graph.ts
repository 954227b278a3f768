import { onnx } from "onnx-proto";

/** ONNX element types used here. */
export const FLOAT = 1;
export const INT64 = 7;

type Dim = number | string;
type Attr = number | number[] | string | { floats: number[] } | { f: number };

/** Builds one ONNX graph (opset 18, IR 8) node by node; names are generated unless given. */
export class GraphBuilder {
  readonly #nodes: onnx.INodeProto[] = [];
  readonly #inits: onnx.ITensorProto[] = [];
  readonly #inputs: onnx.IValueInfoProto[] = [];
  readonly #outputs: onnx.IValueInfoProto[] = [];
  #count = 0;

  constructor(readonly name: string) {}

  input(name: string, elemType: number, dims: Dim[]): string {
    this.#inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  output(name: string, elemType: number, dims: Dim[]): void {
    this.#outputs.push(valueInfo(name, elemType, dims));
  }

  /** A name not used before in this graph. */
  unique(prefix: string): string {
    return `${prefix}_${this.#count++}`;
  }

  /** A float initializer (a weight). */
  weight(name: string, dims: number[], data: Float32Array): string {
    if (data.length !== dims.reduce((a, b) => a * b, 1)) throw new Error(`${name}: ${data.length} values for dims ${dims}`);
    this.#inits.push({ name, dims, dataType: FLOAT, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });
    return name;
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
    this.#nodes.push({ opType, input: inputs, output: [output], name: `${opType}_${this.#count++}`, attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)) });
    return output;
  }

  /** Adds a node with several outputs. */
  opMulti(opType: string, inputs: string[], outputs: number, attrs: Record<string, Attr> = {}): string[] {
    const names = Array.from({ length: outputs }, () => `${opType.toLowerCase()}_${this.#count++}`);
    this.#nodes.push({ opType, input: inputs, output: names, name: `${opType}_${this.#count++}`, attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)) });
    return names;
  }

  /** The serialized model. */
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
