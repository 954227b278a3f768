import { LIMITS } from "../protocol/limits.ts";

const encoder = new TextEncoder();
const size = (v: unknown) => encoder.encode(JSON.stringify(v) ?? "null").length;

/** Splits a string into pieces of at most `max` UTF-8 bytes, never inside a character. */
function splitString(s: string, max: number): string[] {
  const pieces: string[] = [];
  let piece = "";
  let bytes = 0;
  for (const ch of s) {
    const n = encoder.encode(JSON.stringify(ch)).length - 2; // escaped size inside JSON quotes
    if (bytes + n > max && piece) {
      pieces.push(piece);
      piece = "";
      bytes = 0;
    }
    piece += ch;
    bytes += n;
  }
  if (piece || pieces.length === 0) pieces.push(piece);
  return pieces;
}

/**
 * Splits one stream chunk whose JSON is over the 1 MB limit: an array into consecutive
 * sub-arrays, a string into substrings, anything else into pieces of its JSON text.
 * Concatenating the pieces (arrays or strings) gives back the original.
 */
export function splitChunk(chunk: unknown, max: number = LIMITS.streamChunkBytes): unknown[] {
  if (size(chunk) <= max) return [chunk];
  if (typeof chunk === "string") return splitString(chunk, max - 2); // JSON quotes
  if (Array.isArray(chunk)) {
    const out: unknown[] = [];
    let part: unknown[] = [];
    let bytes = 2;
    for (const item of chunk) {
      const n = size(item) + 1;
      if (bytes + n > max && part.length && n + 2 <= max) {
        out.push(part);
        part = [];
        bytes = 2;
      }
      if (n + 2 > max) {
        if (part.length) out.push(part);
        part = [];
        bytes = 2;
        out.push(...splitChunk(item, max));
      } else {
        part.push(item);
        bytes += n;
      }
    }
    if (part.length) out.push(part);
    return out;
  }
  return splitString(JSON.stringify(chunk), max - 2);
}
