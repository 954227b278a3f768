import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");
const CLI = join(ROOT, "runtime/cli.ts");
const own = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const dir = mkdtempSync(join(tmpdir(), "spool-init-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function init(args: string[]) {
  const r = Bun.spawnSync([process.execPath, CLI, "init", ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

test("spool init writes a project that depends on this Spool, with its zod and Bun, and dev/test/build scripts", () => {
  const r = init(["My Worker", "--spool", ROOT]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("Created my-worker in");
  const project = join(dir, "My Worker");
  expect(readdirSync(project).sort()).toEqual([
    ".gitignore",
    "README.md",
    "package.json",
    "spool.toml",
    "src",
    "test_input.json",
    "tsconfig.json",
  ]);
  expect(readdirSync(join(project, "src")).sort()).toEqual(["handler.test.ts", "handler.ts"]);
  expect(JSON.parse(readFileSync(join(project, "package.json"), "utf8"))).toEqual({
    name: "my-worker",
    version: "0.1.0",
    private: true,
    type: "module",
    scripts: {
      dev: "spool dev src/handler.ts --endpoint hello",
      start: "spool serve --config spool.toml",
      test: "tsc --noEmit && bun test",
      build: "spool build src/handler.ts --outfile dist/hello-worker",
    },
    dependencies: { spool: expect.stringMatching(/^file:/), zod: own.dependencies.zod },
    devDependencies: {
      "@types/bun": own.devDependencies["@types/bun"],
      bun: own.dependencies.bun,
      typescript: own.devDependencies.typescript,
    },
  });
  const spec = JSON.parse(readFileSync(join(project, "package.json"), "utf8")).dependencies.spool as string;
  // A path is written relative to the project, as npm resolves file: specs.
  expect(Bun.resolveSync("./package.json", join(project, spec.slice("file:".length)))).toBe(join(ROOT, "package.json"));
  expect(readFileSync(join(project, "README.md"), "utf8")).toStartWith("# my-worker\n");
});

test("without --spool the project depends on this version from the registry", () => {
  expect(init(["plain"]).code).toBe(0);
  expect(JSON.parse(readFileSync(join(dir, "plain", "package.json"), "utf8")).dependencies.spool).toBe(`^${own.version}`);
});

test("spool init overwrites nothing: a folder holding a file it would write is left as it was", () => {
  mkdirSync(join(dir, "taken"));
  writeFileSync(join(dir, "taken", "spool.toml"), "mine");
  const r = init(["taken"]);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain("not overwriting what is there: taken/spool.toml");
  expect(readdirSync(join(dir, "taken"))).toEqual(["spool.toml"]);
  expect(readFileSync(join(dir, "taken", "spool.toml"), "utf8")).toBe("mine");
});

test("spool init with two folders, or a file for the folder, is a usage error", () => {
  const two = init(["a", "b"]);
  expect(two.code).toBe(2);
  expect(two.stderr).toContain("spool init takes one folder (spool init --help lists its options)");
  writeFileSync(join(dir, "a-file"), "");
  const file = init(["a-file"]);
  expect(file.code).toBe(2);
  expect(file.stderr).toContain("is not a folder");
  expect(init(["--help"]).stdout).toContain("usage: spool init [DIR] [--spool SPEC]");
});
