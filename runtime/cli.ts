#!/usr/bin/env bun
import { parseArgs } from "node:util";
import { ConfigError } from "./config/config.ts";

// Commands are imported when chosen, so a worker does not load the server (and the reverse).

const USAGE = `spool: a self-hostable, RunPod-compatible queue for inference jobs

  spool init [DIR] [--spool SPEC]                          scaffold a handler project (package.json, handler, test, spool.toml)
  spool serve [--port 8080] [--data DIR] [--config FILE] [--store redis://HOST:PORT]
                                                           run the queue server (embedded store, or Redis)
  (keys, usage: --store redis://... works on a Redis store too)
  spool keys create [--name NAME] [--scope full|client|worker|read-only] [--endpoints a,b] [--data DIR]
                                                           make an API key (last line of output)
  spool keys list [--data DIR]                             list keys (ids and names, never keys)
  spool keys revoke ID|NAME [--data DIR]                   revoke a key
  spool usage [--data DIR]                                 jobs and cost per API key and endpoint
  spool worker <handler.ts|binary> --url URL --endpoint ID --api-key KEY
                                                           run a worker (or use RunPod's RUNPOD_* env)
  spool run <handler.ts> [--input '<json>']                run one job locally (or ./test_input.json)
  spool dev <handler.ts> [--port 8080]                     local server + worker for a handler
  spool build <handler.ts> --outfile PATH [--gpu cuda|vulkan]
                                                           compile a handler into one worker executable
  spool build --server --outfile PATH                      compile the server and this command into one executable
  spool cache prune                                        remove native libraries built binaries extracted
  spool doctor                                             what this machine can run: GPUs, providers, libraries
`;

/** Returns the exit code, or -1 for commands that keep running (servers). */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve": {
      const { values } = parseArgs({
        args: rest,
        options: { port: { type: "string" }, data: { type: "string" }, config: { type: "string" }, store: { type: "string" } },
      });
      if (values.port !== undefined && !/^\d+$/.test(values.port)) throw new ConfigError(`--port must be a number, got ${values.port}`);
      await (await import("./cli/serve-command.ts")).serveCommand(values);
      return -1;
    }
    case "keys": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          data: { type: "string" },
          config: { type: "string" },
          name: { type: "string" },
          scope: { type: "string" },
          endpoints: { type: "string" },
          store: { type: "string" },
        },
      });
      return (await import("./cli/keys-command.ts")).keysCommand(positionals[0], positionals.slice(1), values);
    }
    case "usage": {
      const { values } = parseArgs({ args: rest, options: { data: { type: "string" }, config: { type: "string" }, store: { type: "string" } } });
      return (await import("./cli/usage-command.ts")).usageCommand(values);
    }
    case "init":
      return (await import("./cli/init-command.ts")).initCommand(rest);
    case "worker":
      return (await import("./cli/worker-commands.ts")).workerCommand(rest);
    case "run":
      return (await import("./cli/worker-commands.ts")).runCommand(rest);
    case "dev":
      return (await import("./cli/dev-command.ts")).devCommand(rest);
    case "build":
      return (await import("./cli/build-command.ts")).buildCommand(rest);
    case "cache":
      return (await import("./cli/cache-command.ts")).cacheCommand(rest[0]);
    case "doctor":
      return (await import("./cli/doctor-command.ts")).doctorCommand();
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
