import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fences, part, ROOT, section } from "./markdown.ts";
import { ShellSession, Terminal } from "./shell-session.ts";
import { mismatch, steps } from "./shell-steps.ts";

const README = readFileSync(join(ROOT, "README.md"), "utf8");
const BLOCKS = fences(part(section(README, "Five-minute walk-through"), "5. A handler of your own"));
const STEPS = BLOCKS.filter((f) => f.lang === "sh").flatMap((f) => steps(f.body));
/** The port `npm run serve` holds through the whole walk-through (its step 1). */
const SERVE_PORT = 8080;
const KEY_PLACEHOLDER = "spool_...";
/** A command the reader runs in a terminal of its own, until Ctrl-C: a server. */
const SERVER = /^npx spool (dev|serve)\b/;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A folder that looks like the checkout, so what the part writes (dist/, data dirs) stays out of it. */
function checkoutCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "spool-handler-walk-"));
  dirs.push(dir);
  for (const entry of readdirSync(ROOT)) {
    if (entry === ".git" || entry === "dist" || entry.startsWith(".data")) continue;
    symlinkSync(join(ROOT, entry), join(dir, entry));
  }
  return dir;
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port!;
  await probe.stop(true);
  return port;
}

describe("the README's walk-through, part 5: a handler of your own", () => {
  test("the servers it starts listen on another port than npm run serve, which still holds its own", () => {
    const servers = STEPS.filter((s) => SERVER.test(s.command));
    expect(servers.map((s) => s.command.split(" ").slice(0, 3).join(" "))).toEqual(["npx spool dev", "npx spool serve"]);
    for (const s of servers) {
      const port = /--port (\d+)/.exec(s.command)?.[1];
      expect(port).toBeDefined();
      expect(Number(port)).not.toBe(SERVE_PORT);
    }
  });

  test(
    "every command runs as written: one job locally, the handler served by spool dev, bad input refused, the built binary run alone and serving a server whose config declares its endpoint",
    async () => {
      const dir = checkoutCopy();
      // Files the reader saves, named by their first line (`// shout.ts`, `# shout.toml`).
      for (const f of BLOCKS.filter((b) => b.lang === "ts" || b.lang === "toml")) {
        const name = /^(?:\/\/|#) (\S+\.(?:ts|toml))\n/.exec(f.body)?.[1];
        expect(name).toBeDefined();
        writeFileSync(join(dir, name!), f.body);
      }
      // The binary is run against a server, not only alone: what a built worker is for.
      expect(STEPS.some((s) => s.command.startsWith("./dist/shout --url"))).toBe(true);

      await using shell = new ShellSession(dir);
      let server: Terminal | undefined;
      let readmePort = "";
      let port = 0;
      let key = "";
      const problems: string[] = [];
      try {
        for (const step of STEPS) {
          if (SERVER.test(step.command)) {
            // The reader stops the one before (Ctrl-C) and starts this one in the same terminal.
            await server?.stop();
            readmePort = /--port (\d+)/.exec(step.command)![1]!;
            port = await freePort();
            server = new Terminal(step.command.replace(`--port ${readmePort}`, `--port ${port}`), dir);
            key = (await server.waitFor(/(spool_[A-Za-z0-9_-]{20,})/))[1]!;
            await server.waitFor(new RegExp(`http://127\\.0\\.0\\.1:${port}\\b`));
            continue;
          }
          const command = step.command.replaceAll(`127.0.0.1:${readmePort}`, `127.0.0.1:${port}`).replaceAll(KEY_PLACEHOLDER, key);
          const { code, output } = await shell.run(command);
          if (code !== 0) problems.push(`exit ${code}: ${step.command}\n${output}\n${shell.stderr.slice(-2000)}`);
          for (const e of step.expected) {
            const why = mismatch(output, e);
            if (why) problems.push(`${step.command}\n  ${why}`);
          }
        }
      } finally {
        await server?.stop();
      }
      expect(problems).toEqual([]);
      expect(existsSync(join(dir, "dist/shout"))).toBe(true);
    },
    { timeout: 240_000 },
  );
});
