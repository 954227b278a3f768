// What reading a request body costs with the JSON nesting check (readJson) against JSON.parse
// alone, the reference, in the same run: medians of many reads, and how the cost grows with the
// number of arrays and objects (the check walks containers, never string bytes).
//
//   bun scripts/bench/request-input.ts
import { readJson } from "../../runtime/server/http/request-input.ts";
import { summarize } from "./harness/stats.ts";
import { printTable } from "./harness/table.ts";

const CASES: Array<[string, string]> = [
  ["small /run body", JSON.stringify({ input: { prompt: "a cat", width: 64, height: 64, steps: 1 } })],
  ["1 MiB string", JSON.stringify({ input: { image: "x".repeat(1 << 20) } })],
  ["10 MiB string", JSON.stringify({ input: { image: "x".repeat(10 << 20) } })],
  ["1,000 objects", JSON.stringify({ input: { rows: Array.from({ length: 1_000 }, (_, i) => ({ i, s: "abc" })) } })],
  ["10,000 objects", JSON.stringify({ input: { rows: Array.from({ length: 10_000 }, (_, i) => ({ i, s: "abc" })) } })],
  ["100,000 objects", JSON.stringify({ input: { rows: Array.from({ length: 100_000 }, (_, i) => ({ i, s: "abc" })) } })],
  ["500 levels deep", `{"input": ${"[".repeat(500)}${"]".repeat(500)}}`],
];

/** Median ms of `fn` over enough runs for ~300 ms, alternating so that noise hits both alike. */
async function time(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  const once = Math.max(performance.now() - t0, 0.001);
  const runs = Math.min(5_000, Math.max(9, Math.round(300 / once)));
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  return summarize(xs).p50;
}

const request = (body: string) => new Request("http://bench/", { method: "POST", body });
const rows: string[][] = [];
for (const [name, body] of CASES) {
  const reference = await time(async () => JSON.parse(await request(body).text()));
  const checked = await time(() => readJson(request(body)));
  rows.push([name, String(body.length), reference.toFixed(4), checked.toFixed(4), (checked / reference).toFixed(2)]);
}
console.log(`Bun ${Bun.version}, ${navigator.hardwareConcurrency} cores; medians`);
printTable(["body", "bytes", "JSON.parse ms (reference)", "readJson ms", "ratio"], "lrrrr", rows);
