#!/usr/bin/env bun
import { ConfigError } from "./config/config.ts";
import { commandHelp, findCommand, generalHelp, parseCommand } from "./cli/command-specs.ts";
import pkg from "../package.json" with { type: "json" };

// Commands are imported when chosen, so a worker does not load the server (and the reverse).

const VERSION = `${pkg.version} (bun ${Bun.version}, ${process.platform}-${process.arch})`;

/** Returns the exit code, or -1 for commands that keep running (servers). */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "--version" || command === "-v" || command === "version") {
    console.log(`spool ${VERSION}`);
    return 0;
  }
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    const about = command === "help" && rest[0] !== undefined ? findCommand(rest[0]) : undefined;
    if (command === "help" && rest[0] !== undefined && !about) return unknown(rest[0]);
    console.log(about ? commandHelp(about) : generalHelp(pkg.version));
    return command === undefined ? 2 : 0;
  }
  const spec = findCommand(command);
  if (!spec) return unknown(command);
  const dashes = rest.indexOf("--");
  if ((dashes < 0 ? rest : rest.slice(0, dashes)).some((a) => a === "--help" || a === "-h")) {
    console.log(commandHelp(spec));
    return 0;
  }
  const { values, positionals } = parseCommand(spec, rest);
  const flags = values as Record<string, string | undefined>;
  switch (command) {
    case "serve":
      if (flags.port !== undefined && !/^\d+$/.test(flags.port)) throw new ConfigError(`--port must be a number, got ${flags.port}`);
      await (await import("./cli/serve-command.ts")).serveCommand(flags);
      return -1;
    case "keys":
      return (await import("./cli/keys-command.ts")).keysCommand(positionals[0], positionals.slice(1), flags);
    case "usage":
      return (await import("./cli/usage-command.ts")).usageCommand(flags);
    case "init":
      return (await import("./cli/init-command.ts")).initCommand(positionals, flags);
    case "worker":
      // The worker parses its own flags (a built worker binary takes the same ones).
      return (await import("./cli/worker-commands.ts")).workerCommand(rest);
    case "run":
      return (await import("./cli/worker-commands.ts")).runCommand(positionals, flags);
    case "dev":
      return (await import("./cli/dev-command.ts")).devCommand(positionals, flags);
    case "build":
      return (await import("./cli/build-command.ts")).buildCommand(
        positionals,
        values as { outfile?: string; target?: string; gpu?: string; server?: boolean },
      );
    case "cache":
      return (await import("./cli/cache-command.ts")).cacheCommand(positionals[0]);
    case "doctor":
      return (await import("./cli/doctor-command.ts")).doctorCommand();
  }
  return unknown(command);
}

function unknown(command: string): number {
  console.error(`spool: unknown command ${command}\n\n${generalHelp(pkg.version)}`);
  return 2;
}

try {
  const code = await main(Bun.argv.slice(2));
  if (code >= 0) process.exit(code);
} catch (err) {
  const e = err as Error & { code?: string };
  if (e instanceof ConfigError || e.code?.startsWith("ERR_PARSE_ARGS")) {
    const command = findCommand(Bun.argv[2]);
    console.error(`spool: ${e.message}${command ? `\n(spool ${command.name} --help lists its options)` : ""}`);
    process.exit(2);
  }
  console.error(`spool: ${e.message}`);
  process.exit(1);
}
