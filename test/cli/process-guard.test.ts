import { expect, test } from "bun:test";
import { resolve } from "node:path";

const FIXTURE = resolve(import.meta.dir, "../fixtures/stray-error-fixture.ts");

test("a guarded process logs an unhandled rejection and an uncaught exception with their stacks and goes on", () => {
  const run = Bun.spawnSync([process.execPath, FIXTURE], { stdout: "pipe", stderr: "pipe" });
  const logged = run.stderr
    .toString()
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(run.exitCode).toBe(0);
  expect(run.stdout.toString()).toBe("still serving\n");
  expect(logged.map((l) => [l.level, l.msg, l.error])).toEqual([
    ["error", "unhandled rejection (the server goes on)", "Error: a rejection nobody handles"],
    ["error", "uncaught exception (the server goes on)", "Error: an exception nobody catches"],
  ]);
  expect(logged.every((l) => String(l.stack).includes("stray-error-fixture.ts"))).toBe(true);
});
