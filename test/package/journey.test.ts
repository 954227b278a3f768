import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bareCopy, ROOT } from "../build/built-binary.ts";
import { spawnProcess } from "../helpers/spawned.ts";
import { describeInstall, pathWithoutBun, run } from "./npm-project.ts";

// A handler author's road from an empty folder, with the npm registry: the packed package is
// installed, scaffolds a project, and that project tests, serves and builds its handler.

const dir = mkdtempSync(join(tmpdir(), "spool-journey-"));
// Over a GB of node_modules: removing it takes a while on a busy machine.
afterAll(() => rmSync(dir, { recursive: true, force: true }), 120_000);
const env = {
  PATH: pathWithoutBun(join(dir, "tools")),
  HOME: join(dir, "home"),
  npm_config_cache: process.env.npm_config_cache ?? join(process.env.HOME ?? dir, ".npm"),
  npm_config_update_notifier: "false",
  npm_config_fund: "false",
  npm_config_audit: "false",
};
const NPM_INSTALL = ["npm", "install", "--loglevel=error"];
let tarball = "";
const app = join(dir, "app");
const project = join(app, "my-worker");
const spool = (cwd: string) => join(cwd, "node_modules", ".bin", "spool");

beforeAll(() => {
  mkdirSync(env.HOME);
  const packed = JSON.parse(run(["npm", "pack", "--json", "--pack-destination", dir], ROOT, env).stdout) as {
    filename: string;
    files: { path: string }[];
  }[];
  tarball = join(dir, packed[0]!.filename);
  const paths = packed[0]!.files.map((f) => f.path);
  console.log(`packed ${packed[0]!.filename}: ${paths.length} files`);
  // Only what runs: no tests, benchmarks, scripts or fixtures.
  expect(paths.filter((p) => /^(test|scripts|docs)\/|\.test\.ts$|fixture/.test(p) && !p.startsWith("runtime/cli/init-template/"))).toEqual(
    [],
  );
  expect(paths).toEqual(
    expect.arrayContaining([
      "bin/spool.js",
      "runtime/cli.ts",
      "sdk/index.ts",
      "sdk/testing.ts",
      "handlers/image/handler.ts",
      "vendor/scalar/standalone.js",
    ]),
  );
}, 60_000);

describe("a handler project from an empty folder", () => {
  test("npm install of the package installs no model runtime, and its bin runs the CLI on the Bun it brings", () => {
    mkdirSync(app);
    run(["npm", "init", "-y"], app, env);
    run([...NPM_INSTALL, tarball], app, env);
    console.log(describeInstall("plain project (spool only)", app));
    for (const heavy of [
      "onnxruntime-node",
      "node-llama-cpp",
      "sharp",
      "@huggingface/transformers",
      "onnx-proto",
      "@scalar/api-reference",
    ]) {
      expect(existsSync(join(app, "node_modules", heavy))).toBe(false);
    }
    expect(Bun.which("bun", { PATH: env.PATH })).toBeNull();
    expect(run([spool(app), "help"], app, env).stdout).toMatch(/\n  init \[DIR\] /);
    // bunx runs the same bin (under Bun it imports the CLI instead of starting a second Bun).
    expect(run([join(app, "node_modules", ".bin", "bunx"), "--bun", "spool", "help"], app, env).stdout).toMatch(/\n  init \[DIR\] /);
  }, 120_000);

  test("bun add of the package installs the same, and its bin runs", () => {
    const added = join(dir, "bun-add");
    mkdirSync(added);
    writeFileSync(join(added, "package.json"), JSON.stringify({ name: "bun-add", private: true, type: "module" }));
    run([join(app, "node_modules", "bun", "bin", "bun.exe"), "add", tarball], added, env);
    console.log(describeInstall("plain project (bun add)", added));
    for (const heavy of ["onnxruntime-node", "node-llama-cpp", "sharp", "@huggingface/transformers", "@scalar/api-reference"]) {
      expect(existsSync(join(added, "node_modules", heavy))).toBe(false);
    }
    expect(run([spool(added), "help"], added, env).stdout).toMatch(/\n  init \[DIR\] /);
  }, 120_000);

  test("spool init scaffolds a project whose npm install && npm test pass", () => {
    const out = run([spool(app), "init", "my-worker", "--spool", tarball], app, env).stdout;
    expect(out).toContain("Created my-worker");
    const pkg = JSON.parse(readFileSync(join(project, "package.json"), "utf8"));
    expect(Object.keys(pkg.scripts).sort()).toEqual(["build", "dev", "start", "test"]);
    // A second init there refuses to overwrite.
    expect(() => run([spool(app), "init", "my-worker"], app, env)).toThrow("not overwriting what is there");
    run(NPM_INSTALL, project, env);
    console.log(describeInstall("plain project (spool init, with TypeScript)", project));
    const tested = run(["npm", "test"], project, env).output;
    expect(tested).toContain("2 pass");
    expect(tested).toContain("0 fail");
  }, 120_000);

  test("spool run runs one job; a bundled model handler without its packages names the command that installs them", () => {
    const ran = run([spool(project), "run", "src/handler.ts", "--input", '{"name":"Bo"}'], project, env).stdout;
    expect(JSON.parse(ran.slice(ran.indexOf("[\n")))).toEqual([{ word: "Hello," }, { word: "Bo!" }]);
    writeFileSync(
      join(project, "src", "image.ts"),
      'import { createImageHandler } from "spool/handlers/image";\nexport default createImageHandler("fast");\n',
    );
    expect(() => run([spool(project), "run", "src/image.ts", "--input", '{"prompt":"a cat"}'], project, env)).toThrow(
      /the image handler needs onnxruntime-node, which is not installed .*\n\s+ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@\^/,
    );
    rmSync(join(project, "src", "image.ts"));
  }, 60_000);

  test("spool dev answers a runsync, and refuses bad input with 400", async () => {
    // The bin itself (npm run dev's command), so that stopping it stops the server and its worker.
    const { scripts } = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as { scripts: { dev: string } };
    const args = [...scripts.dev.split(" ").slice(1), "--port", "0", "--data", join(dir, "dev-data")];
    await using dev = spawnProcess([spool(project), ...args], { cwd: project, env });
    const [, url] = await dev.waitFor(/Spool dev: (http:\/\/\S+)\/v2\/hello /);
    const [key] = await dev.waitFor(/^spool_\S+$/);
    const post = (input: unknown) =>
      fetch(`${url}/v2/hello/runsync`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ input }),
      });
    const ok = await post({ name: "Ada" });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ status: "COMPLETED", output: [{ word: "Hello," }, { word: "Ada!" }] });
    const bad = await post({ name: 42 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain("name");
  }, 60_000);

  test("npm run build makes a worker that answers a job from an empty folder", async () => {
    const out = run(["npm", "run", "build"], project, env).stdout;
    expect(out).toContain("built ");
    using bare = bareCopy(join(project, "dist", "hello-worker"));
    await using job = bare.start(["--input", JSON.stringify({ name: "Cy", greeting: "Hi" })]);
    expect(await job.proc.exited).toBe(0);
    expect(JSON.parse(job.lines.slice(job.lines.indexOf("[")).join("\n"))).toEqual([{ word: "Hi," }, { word: "Cy!" }]);
  }, 120_000);

  test("a project that uses the image handler installs its packages and runs it from the package", () => {
    const images = join(dir, "images");
    mkdirSync(join(images, "src"), { recursive: true });
    run(["npm", "init", "-y"], images, env);
    // onnxruntime-node's install script would fetch CUDA libraries from outside npm.
    run([...NPM_INSTALL, tarball, "onnxruntime-node", "sharp", "@huggingface/transformers", "onnx-proto"], images, {
      ...env,
      ONNXRUNTIME_NODE_INSTALL: "skip",
    });
    console.log(describeInstall("image project (spool + the image handler's packages)", images));
    writeFileSync(
      join(images, "src", "image.ts"),
      'import { createImageHandler } from "spool/handlers/image";\nexport default createImageHandler("fast");\n',
    );
    const { stdout: out } = run(
      [
        spool(images),
        "run",
        "src/image.ts",
        "--input",
        JSON.stringify({ prompt: "a cat", width: 256, height: 256, num_inference_steps: 1 }),
      ],
      images,
      {
        ...env,
        SPOOL_DATA_DIR: join(images, ".data"),
      },
    );
    expect(JSON.parse(out.slice(out.lastIndexOf("{\n")))).toEqual({
      image_url: expect.stringMatching(/^file:\/\/.*\/image\.jpg$/),
      cost: expect.any(Number),
    });
  }, 180_000);
});
