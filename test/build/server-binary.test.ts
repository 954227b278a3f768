import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchChromium } from "../helpers/chromium.ts";
import { until } from "../helpers/until.ts";
import type { Spawned } from "../helpers/spawned.ts";
import { bareCopy, buildHandler, ROOT, type Bare, type Built } from "./built-binary.ts";

// `spool build --server`: the server and the command in one file, run from an empty folder with
// nothing but PATH and HOME (no Bun, no node_modules), its endpoint served by a built worker.
let server: Built;
let worker: Built;
let bare: Bare;
beforeAll(() => {
  worker = buildHandler("handlers/examples/echo.ts");
  server = buildServer();
  bare = bareCopy(server.binary);
}, 120_000);
afterAll(() => {
  bare?.[Symbol.dispose]();
  server?.[Symbol.dispose]();
  worker?.[Symbol.dispose]();
});

/** Runs `spool build --server` into a temp folder. */
function buildServer(): Built {
  const dir = mkdtempSync(join(tmpdir(), "spool-built-"));
  const binary = join(dir, "spool");
  const r = Bun.spawnSync([process.execPath, join(ROOT, "runtime/cli.ts"), "build", "--server", "--outfile", binary], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = r.stdout.toString() + r.stderr.toString();
  if (r.exitCode !== 0) throw new Error(`spool build --server failed (exit ${r.exitCode}):\n${output}`);
  return { binary, output, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

async function serving(proc: Spawned): Promise<{ url: string; key: string }> {
  const url = (await proc.waitFor(/Spool listening on (http:\/\/\S+)/))[1]!;
  const key = (await proc.waitFor(/^\s+(spool_\S+)\s*$/))[1]!;
  return { url, key };
}

describe("a compiled server", () => {
  test("runs jobs on a built worker it starts, and serves the dashboard and the docs", async () => {
    expect(server.output).toContain("built ");
    const config = join(bare.dir, "spool.toml");
    writeFileSync(config, `[endpoints.echo]\nhandler = ${JSON.stringify(worker.binary)}\nworkersMax = 1\n`);
    await using proc = bare.start(["serve", "--port", "0", "--data", join(bare.dir, "data"), "--config", config]);
    const { url, key } = await serving(proc);
    const auth = { authorization: `Bearer ${key}` };

    const res = await fetch(`${url}/v2/echo/runsync`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ input: { hello: "compiled" } }),
    });
    expect(await res.json()).toMatchObject({ status: "COMPLETED", output: { hello: "compiled" } });
    // Its store's checkpoint thread runs inside the binary too: the log reaches the database file.
    const db = join(bare.dir, "data", "spool.db");
    const before = statSync(db).size;
    for (let i = 0; i < 50; i++)
      await fetch(`${url}/v2/echo/run`, { method: "POST", headers: auth, body: JSON.stringify({ input: { pad: "x".repeat(4000) } }) });
    await until(() => statSync(db).size > before, "the compiled server's checkpoint thread to copy the log into spool.db");

    const docs = await fetch(`${url}/docs/scalar.js`);
    expect(docs.status).toBe(200);
    expect((await docs.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    expect(((await (await fetch(`${url}/openapi.json`)).json()) as { openapi: string }).openapi).toStartWith("3.1");

    await using browser = await launchChromium();
    const page = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(String(err)));
    await page.goto(`${url}/dashboard`);
    await page.getByLabel("API key").fill(key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("region", { name: "echo" }).waitFor();
    expect(errors).toEqual([]);
  }, 60_000);

  test("a built worker answers --help with its options under its own name", () => {
    const r = Bun.spawnSync([worker.binary, "--help"], { cwd: bare.dir, stdout: "pipe", stderr: "pipe" });
    const name = `./${worker.binary.split("/").pop()}`;
    expect({ code: r.exitCode, err: r.stderr.toString() }).toEqual({ code: 0, err: "" });
    expect(r.stdout.toString()).toContain(
      `usage: ${name} [--url URL] [--endpoint ID] [--api-key KEY] [--worker-id ID] [--input JSON] [--no-supervise]\n`,
    );
  });

  test("refuses handler sources with the way to build them", async () => {
    await using proc = bare.start(["serve", "--port", "0", "--data", join(bare.dir, "data2")]);
    expect(await proc.proc.exited).toBe(2);
    expect(proc.lines.join("\n")).toContain("a compiled server runs built workers");
    const config = join(bare.dir, "source.toml");
    writeFileSync(config, `[endpoints.echo]\nhandler = ${JSON.stringify(join(ROOT, "handlers/examples/echo.ts"))}\n`);
    await using other = bare.start(["serve", "--port", "0", "--data", join(bare.dir, "data3"), "--config", config]);
    expect(await other.proc.exited).toBe(2);
    expect(other.lines.join("\n")).toContain("endpoint echo: a compiled server runs built workers, not handler sources");
    // Building needs the sources: a compiled spool says where to run it.
    await using build = bare.start(["build", "--server", "--outfile", join(bare.dir, "again")]);
    expect(await build.proc.exited).toBe(2);
    expect(build.lines.join("\n")).toContain("spool build needs the Spool sources and their packages: run it from a checkout");
  });
});
