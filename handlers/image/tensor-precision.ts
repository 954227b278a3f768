import * as ort from "onnxruntime-node";

/** Element types the pipeline converts to and from at a graph's boundary. */
export const FLOAT_TYPES = ["float32", "float16"] as const;
export type FloatType = (typeof FLOAT_TYPES)[number];
export const isFloatType = (t: string): t is FloatType => (FLOAT_TYPES as readonly string[]).includes(t);

/** Host data given to a graph: floats are always fp32 here, ids int64 (converted to what the graph declares). */
export type HostData = Float32Array | BigInt64Array;

/**
 * An ort tensor of `type` holding `data`: fp32 values are rounded to fp16 when the graph wants
 * fp16, int64 ids narrowed to int32 when it wants int32.
 */
export function toTensor(type: string, data: HostData, dims: readonly number[]): ort.Tensor {
  if (type === "float32" && data instanceof Float32Array) return new ort.Tensor("float32", data, dims);
  if (type === "float16" && data instanceof Float32Array) return float16Tensor(data, dims);
  if (type === "int64" && data instanceof BigInt64Array) return new ort.Tensor("int64", data, dims);
  if (type === "int32" && data instanceof BigInt64Array) return new ort.Tensor("int32", Int32Array.from(data, Number), dims);
  throw new Error(`cannot pass ${data.constructor.name} as ${type}`);
}

/** A graph's float output as fp32 host values (fp16 widened; fp32 returned as is). */
export function toFloat32(t: ort.Tensor): Float32Array {
  if (t.type === "float32") return t.data as Float32Array;
  if (t.type === "float16") {
    const d = t.data as Float16Array | Uint16Array;
    return d instanceof Uint16Array ? Float32Array.from(new Float16Array(d.buffer, d.byteOffset, d.length)) : Float32Array.from(d);
  }
  throw new Error(`an output of type ${t.type} where a float tensor was expected`);
}

function float16Tensor(data: Float32Array, dims: readonly number[]): ort.Tensor {
  const bits = new Uint16Array(Float16Array.from(data).buffer);
  const tensor = new ort.Tensor("float16", bits, dims);
  // onnxruntime-common wraps the bits in a Float16Array when the runtime has one, but Bun's N-API
  // reports a Float16Array as zero bytes to onnxruntime-node ("not enough space"), so the tensor
  // must carry the raw bits as a Uint16Array, the representation the native binding reads.
  (tensor as unknown as { cpuData: Uint16Array }).cpuData = bits;
  return tensor;
}
