import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

// The end of .ci/run: the skipped tests by name, then "N passed, M failed" as the last line,
// read from what a real `bun test` printed.

const SCRIPT = resolve(import.meta.dir, "../../scripts/test-summary.sh");

const FILES = {
  "a.test.ts": `import { describe, expect, test } from "bun:test";
describe("a", () => {
  test.skip("b, with a comma", () => {});
  test("passes", () => {});
});
test.skipIf(true)("c > d", () => {});
test("fails", () => expect(1).toBe(2));
test.skip("e", () => {});
`,
  // A second file: its results are counted with the first's.
  "b.test.ts": `import { test } from "bun:test";
test("passes too", () => {});
`,
};

/** Runs bun test over `files` in a fresh folder; returns its output and exit status. */
async function bunTest(files: Record<string, string>): Promise<{ out: string; status: number } & Disposable> {
  const dir = mkdtempSync(join(tmpdir(), "spool-summary-"));
  mkdirSync(join(dir, "test"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, "test", name), text);
  const proc = Bun.spawn([process.execPath, "test"], { cwd: dir, env: { ...process.env, CI: "1" }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, status] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  writeFileSync(join(dir, "out.txt"), stdout + stderr);
  return { out: join(dir, "out.txt"), status, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

async function summary(out: string, status: number): Promise<string[]> {
  const proc = Bun.spawn(["bash", SCRIPT, out, String(status)], { stdout: "pipe", stderr: "inherit" });
  const text = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  return text.trimEnd().split("\n");
}

test("the skipped tests are counted and named on their own line, right before the last line, N passed, M failed", async () => {
  using run = await bunTest(FILES);
  expect(run.status).toBe(1);
  expect(await summary(run.out, run.status)).toEqual(["3 skipped: a > b, with a comma, c > d, e", "2 passed, 1 failed"]);
});

test("with nothing skipped the line says 0 skipped; a failed run with no failed test counts one failure", async () => {
  using run = await bunTest({ "b.test.ts": `import { test } from "bun:test";\ntest("passes", () => {});\n` });
  expect(await summary(run.out, run.status)).toEqual(["0 skipped", "1 passed, 0 failed"]);
  // The typecheck before bun test failed: npm test's status is not 0, though no test failed.
  expect(await summary(run.out, 2)).toEqual(["0 skipped", "1 passed, 1 failed"]);
});

test("a skipped test bun lists again at the end of a long run is named once", async () => {
  // bun repeats the skipped tests under "N tests skipped:" once a run is long enough; the lines
  // below are as a CI run printed them.
  const dir = mkdtempSync(join(tmpdir(), "spool-summary-"));
  try {
    const out = join(dir, "out.txt");
    writeFileSync(
      out,
      [
        "(skip) fuzz: 2500 requests",
        "(pass) a > b [1.00ms]",
        "(skip) setup > on the GPU",
        "2 tests skipped:",
        "(skip) fuzz: 2500 requests",
        "(skip) setup > on the GPU",
        "",
        " 1 pass",
        " 2 skip",
        " 0 fail",
        "",
      ].join("\n"),
    );
    expect(await summary(out, 0)).toEqual(["2 skipped: fuzz: 2500 requests, setup > on the GPU", "1 passed, 0 failed"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
