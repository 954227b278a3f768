#!/usr/bin/env bun
import { parseArgs } from "node:util";
import { keysCommand } from "./cli/keys-command.ts";
import { serveCommand } from "./cli/serve-command.ts";
import { ConfigError } from "./config/config.ts";

const USAGE = `spool: a self-hostable, RunPod-compatible queue for inference jobs

  spool serve [--port 8080] [--data DIR] [--config FILE]   run the queue server
  spool keys create [--name NAME] [--data DIR]             make an API key (last line of output)
  spool keys list [--data DIR]                             list keys (ids and names, never keys)
  spool keys revoke ID|NAME [--data DIR]                   revoke a key
`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      port: { type: "string" },
      data: { type: "string" },
      config: { type: "string" },
      name: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return command || values.help ? 0 : 2;
  }
  switch (command) {
    case "serve":
      if (values.port !== undefined && !/^\d+$/.test(values.port)) throw new ConfigError(`--port must be a number, got ${values.port}`);
      await serveCommand(values);
      return -1; // keeps running
    case "keys":
      return keysCommand(rest[0], rest.slice(1), values);
    default:
      console.error(`unknown command ${command}\n\n${USAGE}`);
      return 2;
  }
}

try {
  const code = await main(Bun.argv.slice(2));
  if (code >= 0) process.exit(code);
} catch (err) {
  if (err instanceof ConfigError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
    console.error(`spool: ${(err as Error).message}`);
    process.exit(2);
  }
  throw err;
}
