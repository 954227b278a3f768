import { expect, test } from "bun:test";
import { lazyJson, rawJson, stringifyWith, stringifyWithout } from "../../runtime/server/store/raw-json.ts";

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
  const value = { s: 'é\n"😀', n: [1.5, 0, 1e21, null] };
  for (const body of [{}, { id: "x" }, { id: "x", output: 1, error: "e" }]) {
    expect(JSON.parse(stringifyWith(body, "output", JSON.stringify(value)))).toEqual({ ...body, output: value });
  }
});

test("a job written without a field never reads that field, writes a long one as its text, and is the same JSON otherwise", () => {
  const output = { s: 'é\n"😀'.repeat(2_000), nested: { input: "kept: not the job's own" } };
  const job: Record<string, unknown> = { id: "j", gone: undefined, status: "COMPLETED" };
  lazyJson(job, "input", () => {
    throw new Error("the input was read");
  });
  let parses = 0;
  lazyJson(job, "output", () => (parses++, JSON.stringify(output)));
  const text = stringifyWithout(job, "input");
  expect(JSON.parse(text)).toEqual({ id: "j", status: "COMPLETED", output });
  expect(text).toContain(`"output":${JSON.stringify(output)}`); // spliced as read
  expect(Object.getOwnPropertyDescriptor(job, "output")?.get).toBeDefined(); // not parsed for it
  expect(parses).toBe(1); // its text read once
  const plain = { id: "p", input: { a: 1 }, output: [1, { input: 2 }] };
  expect(JSON.parse(stringifyWithout(plain, "input"))).toEqual({ id: "p", output: [1, { input: 2 }] });
  expect(stringifyWithout({}, "input")).toBe("{}");
  const onlyLazy = {};
  lazyJson(onlyLazy, "output", () => "[1]");
  expect(JSON.parse(stringifyWithout(onlyLazy, "input"))).toEqual({ output: [1] });
});
