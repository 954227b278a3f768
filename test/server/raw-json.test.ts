import { expect, test } from "bun:test";
import { lazyJson, rawJson, stringifyWith } from "../../runtime/server/store/raw-json.ts";

test("a lazily parsed field reads its text once, parses on first use, and forgets the text once assigned", () => {
  let reads = 0;
  const job: Record<string, unknown> = { id: "j" };
  lazyJson(job, "output", () => (reads++, '{"a":[1,2]}'));
  expect(reads).toBe(0);
  expect(rawJson(job, "output")).toBe('{"a":[1,2]}');
  expect(job.output).toEqual({ a: [1, 2] });
  expect(job.output).toBe(job.output); // parsed once
  expect(reads).toBe(1);
  expect(JSON.stringify(job)).toBe('{"id":"j","output":{"a":[1,2]}}');
  job.output = { b: 1 };
  expect([job.output, rawJson(job, "output")]).toEqual([{ b: 1 }, undefined]);
});

test("a body written with a field given as text is the same JSON as the body written whole", () => {
  const value = { s: "é\n\"😀", n: [1.5, 0, 1e21, null] };
  for (const body of [{}, { id: "x" }, { id: "x", output: 1, error: "e" }]) {
    expect(JSON.parse(stringifyWith(body, "output", JSON.stringify(value)))).toEqual({ ...body, output: value });
  }
});
