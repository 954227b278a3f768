import { expect, test } from "bun:test";
import { runJob } from "spool/sdk/testing";
import handler from "./handler.ts";

test("streams the greeting word by word", async () => {
  const run = await runJob(handler, { name: "Ada" });
  expect(run.status).toBe("COMPLETED");
  expect(run.stream).toEqual([{ word: "Hello," }, { word: "Ada!" }]);
});

test("a job with no name fails, naming the field", async () => {
  const run = await runJob(handler, { name: "" });
  expect(run.status).toBe("FAILED");
  expect(run.status === "FAILED" && run.error).toContain("name");
});
