import { expect, test } from "bun:test";
import { splitChunk } from "../../runtime/protocol/stream-chunks.ts";

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

test("a long string splits into pieces within the limit that join back to it, whatever its characters", () => {
  // Every kind of character JSON escapes or encodes differently: ASCII, quotes and backslashes,
  // control characters (short and \u escapes), 2- and 3-byte UTF-8, surrogate pairs and lone surrogates.
  const alphabet = ["a", "Z", " ", '"', "\\", "\n", "\t", "\u0001", "\u001f", "é", "ж", "€", "中", "😀", "𝄞", "\ud800", "\udfff", "\u2028"];
  let seed = 7;
  const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed);
  for (const max of [20, 64, 1000]) {
    const s = Array.from({ length: 5000 }, () => alphabet[next() % alphabet.length]).join("");
    const pieces = splitChunk(s, max) as string[];
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join("")).toBe(s);
    for (const p of pieces) {
      expect(bytes(p)).toBeLessThanOrEqual(max);
      expect(p.length).toBeGreaterThan(0);
    }
    // No piece starts with the second half of a pair that the one before it ended with the first half of.
    for (let i = 1; i < pieces.length; i++) {
      const before = pieces[i - 1]!.charCodeAt(pieces[i - 1]!.length - 1);
      const after = pieces[i]!.charCodeAt(0);
      expect(before >= 0xd800 && before <= 0xdbff && (after & 0xfc00) === 0xdc00).toBe(false);
    }
  }
});

test("an output of several megabytes splits into pieces of at most 1 MB that join back to it", () => {
  const s = "x".repeat(3_500_000) + "é".repeat(200_000);
  const pieces = splitChunk(s) as string[];
  expect(pieces.join("")).toBe(s);
  expect(pieces.every((p) => bytes(p) <= 1_000_000)).toBe(true);
  expect(pieces.length).toBe(4);
  expect(splitChunk({ small: true })).toEqual([{ small: true }]);
});

test("each piece of a split string is as long as fits, also where long runs of plain ASCII meet other characters", () => {
  // A stored result's stream is cut again when read, so the cuts must be the one greedy answer.
  let seed = 11;
  const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed);
  const special = ['"', "\\", "\n", "\u0001", "é", "中", "😀", "\ud800"];
  for (const max of [5, 64, 1000]) {
    const s = Array.from({ length: 400 }, () => (next() % 3 ? "a".repeat(next() % 300) : special[next() % special.length])).join("");
    const pieces = splitChunk(s, max + 2) as string[]; // strings are cut to max - 2 (their quotes)
    expect(pieces.join("")).toBe(s);
    for (let i = 0; i < pieces.length; i++) {
      expect(bytes(pieces[i]) - 2).toBeLessThanOrEqual(max);
      if (i === pieces.length - 1) continue;
      const after = pieces[i + 1]!;
      const first = after.codePointAt(0)! > 0xffff && (after.charCodeAt(1) & 0xfc00) === 0xdc00 ? after.slice(0, 2) : after.slice(0, 1);
      expect(bytes(pieces[i] + first) - 2).toBeGreaterThan(max);
    }
  }
  // A limit no character fits in still ends, one character a piece.
  const s = "a".repeat(40) + "é";
  expect(splitChunk(s, 2)).toEqual([...s]);
});
