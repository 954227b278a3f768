import { LIMITS } from "./limits.ts";

const size = (v: unknown, json?: string) => Buffer.byteLength(json ?? JSON.stringify(v) ?? "null");

/** UTF-8 bytes of one UTF-16 unit (not part of a surrogate pair) as JSON.stringify writes it inside quotes. */
function escapedBytes(code: number): number {
  if (code < 0x20) return code === 8 || code === 9 || code === 10 || code === 12 || code === 13 ? 2 : 6; // \n or \u00XX
  if (code === 0x22 || code === 0x5c) return 2; // \" and \\
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  if (code >= 0xd800 && code <= 0xdfff) return 6; // a lone surrogate: \uXXXX
  return 3;
}

/** Characters JSON does not write as one byte of their own: escapes, quotes, non-ASCII. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON escapes
const NOT_PLAIN = /[\u0000-\u001f"\\\u0080-\uffff]/g;
/** Plain characters counted one by one before the rest of their run is found with NOT_PLAIN. */
const RUN_AFTER = 32;

/**
 * Splits a string into pieces whose JSON text is at most `max` UTF-8 bytes (quotes aside), never
 * inside a character, each piece as long as fits. Linear in the length: characters are counted
 * one by one, except that a long run of plain ASCII (one byte each) is found by a native search
 * and taken whole.
 */
function splitString(s: string, max: number): string[] {
  const pieces: string[] = [];
  let start = 0;
  let bytes = 0;
  let plain = 0;
  const cut = (at: number) => {
    pieces.push(s.slice(start, at));
    start = at;
    bytes = 0;
  };
  for (let i = 0; i < s.length; ) {
    if (plain >= RUN_AFTER) {
      NOT_PLAIN.lastIndex = i;
      const end = NOT_PLAIN.exec(s)?.index ?? s.length;
      while (i < end) {
        const room = max - bytes;
        if (end - i <= room) {
          bytes += end - i;
          i = end;
        } else if (room > 0) {
          i += room;
          cut(i);
        } else if (i === start) {
          i++;
          bytes++;
        } else cut(i);
      }
      plain = 0;
      continue;
    }
    const c = s.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    const units = pair ? 2 : 1;
    const n = pair ? 4 : escapedBytes(c);
    plain = n === 1 ? plain + 1 : 0;
    if (bytes + n > max && i > start) cut(i);
    bytes += n;
    i += units;
  }
  if (start < s.length || pieces.length === 0) pieces.push(s.slice(start));
  return pieces;
}

/**
 * A job's stream when it streamed nothing and its output is its stream (stored once, as the
 * output): the `count` pieces splitChunk cuts it into, from index `from` on.
 */
export function outputPieces(output: unknown, count: number, from: number): unknown[] {
  if (from >= count) return [];
  return (count === 1 ? [output] : splitChunk(output)).slice(Math.max(0, from));
}

/**
 * Splits one stream chunk whose JSON is over the 1 MB limit: an array into consecutive
 * sub-arrays, a string into substrings, anything else into pieces of its JSON text.
 * Concatenating the pieces (arrays or strings) gives back the original. `json`: the chunk's
 * JSON text when the caller has it already (it is not written again to measure it).
 */
export function splitChunk(chunk: unknown, max: number = LIMITS.streamChunkBytes, json?: string): unknown[] {
  if (size(chunk, json) <= max) return [chunk];
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
  return splitString(json ?? JSON.stringify(chunk), max - 2);
}
