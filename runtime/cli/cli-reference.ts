import { COMMANDS, EXIT_CODES, usageLine } from "./command-specs.ts";

const cell = (text: string) => text.replaceAll("|", "\\|");

/** docs/reference/cli.md: every command's usage, options and notes, from the specs `--help` prints. */
export function cliReference(): string {
  const lines = [
    "# Command line reference",
    "",
    "Every `spool` command, its options and its exit codes. The same text is in the command itself:",
    "`spool <command> --help` (or `spool help <command>`); `spool --version` prints the version, the Bun",
    "it runs on and the platform. This page is generated from the commands' own definitions",
    "(`bun scripts/cli-reference.ts`), so it lists exactly the options each command accepts.",
    "",
    "```sh",
    "spool build --help",
    "spool build handlers/image/fast.ts --target linux-arm64 --outfile dist/image-fast",
    "```",
    "",
    "## Exit codes",
    "",
    "| code | meaning |",
    "|---|---|",
    ...EXIT_CODES.map(([code, meaning]) => `| ${code} | ${meaning} |`),
    "",
    "`serve` and `dev` keep running, and exit 0 when stopped with SIGINT or SIGTERM (`serve` after its workers drain; a second signal exits 1 at once).",
  ];
  for (const spec of COMMANDS) {
    lines.push(
      "",
      `## spool ${spec.name}`,
      "",
      `${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.`,
      "",
      "```text",
      usageLine(spec),
      "```",
    );
    const options = Object.entries(spec.options);
    if (options.length > 0) {
      lines.push("", "| option | what it does |", "|---|---|");
      for (const [name, o] of options)
        lines.push(`| \`--${name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}\` | ${cell(o.description)} |`);
    }
    if (spec.notes?.length) lines.push("", ...spec.notes.map((n) => `- ${n}`));
  }
  return `${lines.join("\n")}\n`;
}
