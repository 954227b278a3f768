import { describe, expect, test } from "bun:test";
import { mismatch, steps } from "./shell-steps.ts";

describe("walk-through steps", () => {
  test("a comment right below a command is its answer; one after a blank line is not", () => {
    const block = ["# Submit", "curl -s a \\", "  -d x", '# {"status":"COMPLETED"}', "", "# Next", "curl -s b"].join("\n");
    expect(steps(block)).toEqual([
      { command: "curl -s a \\\n  -d x", expected: ['{"status":"COMPLETED"}'] },
      { command: "curl -s b", expected: [] },
    ]);
  });

  test("a JSON answer matches on the keys and string values shown, … for what varies", () => {
    const shown = '{"id":"sync-…","status":"COMPLETED","delayTime":35,"output":{"hello":"spool"}}';
    expect(mismatch('{"delayTime":2,"id":"sync-1","output":{"hello":"spool"},"status":"COMPLETED"}', shown)).toBeNull();
    expect(mismatch('{"id":"sync-1","status":"FAILED","delayTime":2,"output":null}', shown)).toContain('"status":"COMPLETED"');
    expect(mismatch('{"error":"not found"}', '{"jobs":{"completed":1,…},"workers":{…}}')).toContain("not jobs, workers");
    expect(mismatch("Not Found", shown)).toContain("not JSON");
  });

  test("a text answer matches its pieces in order", () => {
    expect(mismatch("cat.png: PNG image data, 256 x 256, 8-bit/color RGB", "cat.png: PNG image data, 256 x 256, …")).toBeNull();
    expect(mismatch("cat.png: JPEG image data", "cat.png: PNG image data, 256 x 256, …")).not.toBeNull();
  });
});
