import { expect, test } from "bun:test";
import { z } from "zod";
import { defineHandler } from "../../sdk/index.ts";

test("defineHandler without an input schema or a handler function fails at import, naming what is missing", () => {
  // As a JavaScript author could write it: the types would have refused it.
  const define = defineHandler as (options: unknown) => unknown;
  expect(() => define({ handler: () => 1 })).toThrow("defineHandler: `input` must be a zod schema");
  expect(() => define({ input: { parse() {} }, handler: () => 1 })).toThrow("defineHandler: `input` must be a zod schema");
  expect(() => define({ input: z.unknown() })).toThrow("defineHandler: `handler` must be a function");
  expect(define({ input: z.unknown(), handler: () => 1 })).toMatchObject({ kind: expect.anything() });
});
