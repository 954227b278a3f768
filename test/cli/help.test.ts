import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { cliReference } from "../../runtime/cli/cli-reference.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

async function spool(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

/** What each command's help must list: the options it accepts. */
const OPTIONS: Record<string, string[]> = {
  serve: ["--port N", "--data DIR", "--config FILE", "--store URL"],
  keys: ["--name NAME", "--scope SCOPE", "--endpoints A,B", "--data DIR", "--config FILE", "--store URL"],
  usage: ["--data DIR", "--config FILE", "--store URL"],
  worker: ["--url URL", "--endpoint ID", "--api-key KEY", "--worker-id ID", "--input JSON", "--no-supervise"],
  run: ["--input JSON"],
  dev: ["--port N", "--data DIR", "--endpoint ID"],
  build: ["--outfile PATH", "--target PLATFORM", "--gpu KIND", "--server"],
  cache: [],
  doctor: [],
};

describe("spool explains itself", () => {
  test.each(Object.entries(OPTIONS))("spool %s --help lists its options; spool help <command> says the same", async (command, options) => {
    const help = await spool(command, "--help");
    expect({ code: help.code, err: help.err }).toEqual({ code: 0, err: "" });
    expect(help.out).toStartWith(`spool ${command}: `);
    expect(help.out).toContain(`usage: spool ${command}`);
    const listed = [...help.out.matchAll(/^  (--[\w-]+(?: [A-Z,]+)?)\s{2,}/gm)].map((m) => m[1]);
    expect(listed).toEqual([...options, "--help"]);
    expect(help.out).toContain("exit codes: 0 done, 1 failed (the reason on stderr), 2 bad usage");
    expect(await spool("help", command)).toEqual(help);
    expect((await spool(command, "-h")).out).toBe(help.out);
  });

  test("an option a command does not take is a usage error (exit 2) that points to its help", async () => {
    expect(await spool("build", "handler.ts", "--tagret", "linux-arm64")).toEqual({
      code: 2,
      out: "",
      err: "spool: Unknown option '--tagret'. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- \"--tagret\"\n(spool build --help lists its options)\n",
    });
    expect((await spool("serve", "--port", "x")).code).toBe(2);
  });

  test("spool --version prints the version; the general help lists every command", async () => {
    expect(await spool("--version")).toEqual({
      code: 0,
      out: `spool ${pkg.version} (bun ${Bun.version}, ${process.platform}-${process.arch})\n`,
      err: "",
    });
    expect((await spool("-v")).out).toBe((await spool("--version")).out);
    const help = await spool("--help");
    expect(help.code).toBe(0);
    for (const command of Object.keys(OPTIONS)) expect(help.out).toMatch(new RegExp(`^  ${command} `, "m"));
    expect(help.out).toContain("spool <command> --help");
    // With no command at all it still helps, but exits 2: a script that forgot its command fails.
    expect(await spool()).toEqual({ ...help, code: 2 });
    const unknown = await spool("buidl");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toStartWith("spool: unknown command buidl\n");
    expect((await spool("help", "buidl")).code).toBe(2);
  });
});

describe("the command line reference page", () => {
  test("docs/reference/cli.md is what the commands' own definitions say (bun scripts/cli-reference.ts writes it)", async () => {
    const page = await Bun.file(resolve(import.meta.dir, "../../docs/reference/cli.md")).text();
    expect(page).toBe(cliReference());
    for (const command of Object.keys(OPTIONS)) expect(page).toContain(`\n## spool ${command}\n`);
  });
});
