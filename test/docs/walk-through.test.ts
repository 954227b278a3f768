import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../runtime/config/config.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { before, fences, ROOT, section } from "./markdown.ts";
import { mismatch, steps, type Step } from "./shell-steps.ts";

const README = readFileSync(join(ROOT, "README.md"), "utf8");
/** Parts 1 to 4, against the server of `npm run serve`; part 5 starts servers of its own (handler-walk-through.test.ts). */
const WALK = fences(before(section(README, "Five-minute walk-through"), "5. A handler of your own"));

/** The README's server and key placeholder, replaced by the test server's. */
const HOST = "http://127.0.0.1:8080";
const KEY_PLACEHOLDER = "spool_...";

let srv: TestServer;
let dir: string;

beforeAll(async () => {
  // The endpoints `npm run serve` serves, workers started on demand by the scaler.
  const { endpoints } = await loadConfig();
  srv = await startTestServer({ server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 2000 }, endpoints });
  // A folder that looks like the checkout, so files the walk-through writes stay out of it.
  dir = mkdtempSync(join(tmpdir(), "spool-walk-"));
  for (const entry of readdirSync(ROOT)) if (entry !== ".git") symlinkSync(join(ROOT, entry), join(dir, entry));
});

afterAll(async () => {
  await srv?.[Symbol.asyncDispose]();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs the steps in one shell, in order, and answers each step's output and exit status. */
async function run(all: Step[]): Promise<{ step: Step; code: number; output: string }[]> {
  const mark = `@@step-${crypto.randomUUID()}@@`;
  const script = all
    .map((s) => `${s.command.replaceAll(HOST, srv.url).replaceAll(KEY_PLACEHOLDER, srv.key)}\necho "${mark} $?"`)
    .join("\n");
  const proc = Bun.spawn(["bash", "-c", script], { cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env } });
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const pieces = stdout.split(new RegExp(`${mark} (\\d+)\\n`));
  const results = all.map((step, i) => ({ step, output: pieces[i * 2] ?? "", code: Number(pieces[i * 2 + 1] ?? -1) }));
  if (results.some((r) => r.code !== 0)) console.error(stderr);
  return results;
}

describe("the README's walk-through", () => {
  test("has its five parts: curl, the dashboard, an image, the OpenAI client, a handler", () => {
    const headings = [...section(README, "Five-minute walk-through").matchAll(/^### (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual(["1. A job with curl", "2. The dashboard", "3. An image", "4. The OpenAI client", "5. A handler of your own"]);
  });

  test(
    "every command of parts 1 to 4 runs as written against a real server and answers what the README shows",
    async () => {
      // TypeScript blocks named by their first line (`// chat.ts`) are files the reader saves.
      for (const f of WALK.filter((f) => f.lang === "ts")) {
        const name = /^\/\/ (\S+\.ts)\n/.exec(f.body)?.[1];
        expect(name).toBeDefined();
        writeFileSync(join(dir, name!), f.body.replaceAll(HOST, srv.url));
      }
      const all = WALK.filter((f) => f.lang === "sh").flatMap((f) => steps(f.body));
      expect(all.length).toBeGreaterThan(10);
      const problems: string[] = [];
      for (const { step, code, output } of await run(all)) {
        if (code !== 0) problems.push(`exit ${code}: ${step.command}\n${output}`);
        for (const e of step.expected) {
          const why = mismatch(output, e);
          if (why) problems.push(`${step.command}\n  ${why}`);
        }
      }
      expect(problems).toEqual([]);
      // The image was fetched from the URL the job answered with.
      expect(readFileSync(join(dir, "cat.png")).subarray(1, 4).toString()).toBe("PNG");
    },
    { timeout: 240_000 },
  );
});
