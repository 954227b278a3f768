#!/usr/bin/env bun
import { parseArgs } from "node:util";
import { buildCommand } from "./cli/build-command.ts";
import { devCommand } from "./cli/dev-command.ts";
import { keysCommand } from "./cli/keys-command.ts";
import { serveCommand } from "./cli/serve-command.ts";
import { runCommand, workerCommand } from "./cli/worker-commands.ts";
import { ConfigError } from "./config/config.ts";

const USAGE = `spool: a self-hostable, RunPod-compatible queue for inference jobs

  spool serve [--port 8080] [--data DIR] [--config FILE]   run the queue server
  spool keys create [--name NAME] [--data DIR]             make an API key (last line of output)
  spool keys list [--data DIR]                             list keys (ids and names, never keys)
  spool keys revoke ID|NAME [--data DIR]                   revoke a key
  spool worker <handler.ts|binary> --url URL --endpoint ID --api-key KEY
                                                           run a worker (or use RunPod's RUNPOD_* env)
  spool run <handler.ts> [--input '<json>']                run one job locally (or ./test_input.json)
  spool dev <handler.ts> [--port 8080]                     local server + worker for a handler
  spool build <handler.ts> --outfile PATH                  compile a handler into one worker executable
`;

/** Returns the exit code, or -1 for commands that keep running (servers). */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve": {
      const { values } = parseArgs({
        args: rest,
        options: { port: { type: "string" }, data: { type: "string" }, config: { type: "string" } },
      });
      if (values.port !== undefined && !/^\d+$/.test(values.port)) throw new ConfigError(`--port must be a number, got ${values.port}`);
      await serveCommand(values);
      return -1;
    }
    case "keys": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { data: { type: "string" }, config: { type: "string" }, name: { type: "string" } },
      });
      return keysCommand(positionals[0], positionals.slice(1), values);
    }
    case "worker":
      return workerCommand(rest);
    case "run":
      return runCommand(rest);
    case "dev":
      return devCommand(rest);
    case "build":
      return buildCommand(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`unknown command ${command}\n\n${USAGE}`);
      return 2;
  }
}

try {
  const code = await main(Bun.argv.slice(2));
  if (code >= 0) process.exit(code);
} catch (err) {
  const e = err as Error & { code?: string };
  if (e instanceof ConfigError || e.code?.startsWith("ERR_PARSE_ARGS")) {
    console.error(`spool: ${e.message}`);
    process.exit(2);
  }
  console.error(`spool: ${e.message}`);
  process.exit(1);
}
