import { parseArgs } from "node:util";
import { TARGET_NAMES } from "../build/targets.ts";
import { EXIT_START_PERMANENT } from "../protocol/exit-codes.ts";
// Type only: the help must not load the worker (nor the server) to print it.
import type { WORKER_FLAGS } from "../worker/worker-main.ts";

/** One option of a command: its parseArgs type and what `--help` says of it. */
export interface OptionSpec {
  type: "string" | "boolean";
  /** The value's placeholder in help (`PATH`, `N`); string options only. */
  value?: string;
  description: string;
}

/** A command's usage, defined once: `--help` prints it and the command parses its arguments with it. */
export interface CommandSpec {
  name: string;
  /** Positional arguments as shown in usage (`<handler.ts>`, `create|list|revoke`). */
  args?: string;
  summary: string;
  options: Record<string, OptionSpec>;
  /** Further lines printed under the options (examples, environment, exit codes). */
  notes?: string[];
}

const data: OptionSpec = { type: "string", value: "DIR", description: "the embedded store's directory (default .data)" };
const config: OptionSpec = { type: "string", value: "FILE", description: "a config file (TOML or JSON); the built-in one when left out" };
const store: OptionSpec = { type: "string", value: "URL", description: "a store URL (redis://HOST:PORT) instead of the embedded store" };

const WORKER_OPTIONS: { [K in keyof typeof WORKER_FLAGS]: OptionSpec } = {
  url: {
    type: "string",
    value: "URL",
    description: "the queue server (or RunPod's RUNPOD_WEBHOOK_GET_JOB and RUNPOD_WEBHOOK_POST_OUTPUT)",
  },
  endpoint: { type: "string", value: "ID", description: "the endpoint whose jobs this worker takes" },
  "api-key": { type: "string", value: "KEY", description: "a worker (or full) key (or SPOOL_API_KEY, RUNPOD_AI_API_KEY)" },
  "worker-id": { type: "string", value: "ID", description: "this worker's id (or RUNPOD_POD_ID; a random one when left out)" },
  input: { type: "string", value: "JSON", description: "run this one job locally, print its output and exit" },
  "no-supervise": { type: "boolean", description: "run the poll loop in this process, without a supervising parent" },
};

/** What every command's exit code means. */
export const EXIT_CODES: Array<[number, string]> = [
  [0, "done"],
  [1, "failed (the reason on stderr): a build, a job run locally, a key not found"],
  [2, "bad usage: unknown command or option, bad value, bad config file"],
  [
    EXIT_START_PERMANENT,
    "a worker cannot start for good: its handler does not load, its options fail their schema, or setup() threw PermanentStartError",
  ],
];
const EXIT_LINE = `exit codes: ${EXIT_CODES.map(([code, meaning]) => `${code} ${meaning.split(":")[0]}`).join(", ")}`;

/** Every command, in the order the general help lists them. */
export const COMMANDS: CommandSpec[] = [
  {
    name: "init",
    args: "[DIR]",
    summary:
      "scaffold a handler project in DIR (default: this folder): package.json with dev, test and build scripts, a handler and its test, spool.toml",
    options: {
      spool: {
        type: "string",
        value: "SPEC",
        description: "where the project gets Spool from: a version range, or the path of a folder or .tgz (default: this Spool's version)",
      },
    },
    notes: ["never overwrites a file that is there"],
  },
  {
    name: "serve",
    summary: "run the queue server (embedded store, or Redis)",
    options: {
      port: { type: "string", value: "N", description: "the port to listen on (default 8080; 0 picks a free one)" },
      data,
      config,
      store,
    },
    notes: [
      "runs until SIGINT or SIGTERM, then waits for its workers to drain (a second signal exits at once, code 1); the first start with no keys creates one and prints it once",
    ],
  },
  {
    name: "keys",
    args: "create|list|revoke [ID|NAME]",
    summary: "make, list and revoke API keys",
    options: {
      name: { type: "string", value: "NAME", description: 'create: the key\'s name (default "default")' },
      scope: { type: "string", value: "SCOPE", description: "create: full, client, worker or read-only (default full)" },
      endpoints: { type: "string", value: "A,B", description: "create: the endpoints the key may reach (default all)" },
      data,
      config,
      store,
    },
    notes: [
      "create prints the key as its last line, once; list shows ids and names, never keys",
      "revoke exits 1 when no active key has that id or name",
    ],
  },
  { name: "usage", summary: "jobs and cost per API key and endpoint", options: { data, config, store } },
  {
    name: "worker",
    args: "<handler.ts|binary>",
    summary: "run a worker for a handler (or a built worker binary)",
    options: WORKER_OPTIONS,
    notes: ["with no server configured, or with --input, it runs one job locally and exits (1 when the job fails)"],
  },
  {
    name: "run",
    args: "<handler.ts>",
    summary: "run one job locally and print its output",
    options: { input: WORKER_OPTIONS.input },
    notes: ["without --input it reads ./test_input.json; exits 1 when the job fails"],
  },
  {
    name: "dev",
    args: "<handler.ts>",
    summary: "a local server and a worker for one handler",
    options: {
      port: { type: "string", value: "N", description: "the server's port (default 8080)" },
      data: { type: "string", value: "DIR", description: "the store's directory (default .data-dev)" },
      endpoint: { type: "string", value: "ID", description: "the endpoint's id (default the handler's file name)" },
    },
  },
  {
    name: "build",
    args: "<handler.ts>",
    summary: "compile a handler into one worker executable, for this machine or another",
    options: {
      outfile: {
        type: "string",
        value: "PATH",
        description: "where the executable goes (default the handler's name; `spool` with --server)",
      },
      target: {
        type: "string",
        value: "PLATFORM",
        description: `the platform it runs on: ${TARGET_NAMES.join(", ")} (default this machine)`,
      },
      gpu: { type: "string", value: "KIND", description: "also embed a GPU build of the native parts: cuda or vulkan" },
      server: { type: "boolean", description: "build the spool command and server instead of a worker (no handler)" },
    },
    notes: [
      "example: spool build handler.ts --target linux-arm64 --outfile worker-arm64 (then copy worker-arm64 to the host and run it)",
      "the worker it makes takes spool worker's options (./worker-arm64 --help lists them)",
      "another platform's native parts come from the package itself, or from the npm registry, fetched once into <cache>/spool/packages",
      "a part with no prebuilt for the target stops the build before anything is written, naming the platforms it has",
      "spool build --server [--target PLATFORM] [--outfile PATH] builds the spool command and server (see docs/build/cross-targets.md)",
    ],
  },
  { name: "cache", args: "prune", summary: "remove the native libraries built binaries extracted", options: {} },
  { name: "doctor", summary: "what this machine can run: GPUs, providers, libraries", options: {} },
];

/** The spec of `name`, or undefined. */
export const findCommand = (name: string | undefined): CommandSpec | undefined => COMMANDS.find((c) => c.name === name);

const flag = (name: string, o: OptionSpec) => `--${name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}`;

/** The one-line usage of a command: `spool build <handler.ts> [--outfile PATH] ...`; `program` replaces `spool <command> <args>`. */
export function usageLine(spec: CommandSpec, program?: string): string {
  const options = Object.entries(spec.options).map(([name, o]) => `[${flag(name, o)}]`);
  return [program ?? ["spool", spec.name, spec.args].filter(Boolean).join(" "), ...options].join(" ");
}

/** What `spool <command> --help` prints; `program` names another program that takes the same options (a built worker). */
export function commandHelp(spec: CommandSpec, program?: string): string {
  const entries = Object.entries(spec.options);
  const width = Math.max(12, ...entries.map(([name, o]) => flag(name, o).length)) + 2;
  const lines = [`${program ?? `spool ${spec.name}`}: ${spec.summary}`, "", `usage: ${usageLine(spec, program)}`];
  if (entries.length > 0) lines.push("", "options:", ...entries.map(([name, o]) => `  ${flag(name, o).padEnd(width)}${o.description}`));
  lines.push(`  ${"--help".padEnd(width)}this help`, "", ...(spec.notes ?? []), EXIT_LINE);
  return lines.join("\n");
}

/** What a worker binary from `spool build` prints for --help: the worker's options under its own name. */
export const workerBinaryHelp = (program: string): string => commandHelp(findCommand("worker")!, program);

/** The general help: every command with its summary. */
export function generalHelp(version: string): string {
  const width = Math.max(...COMMANDS.map((c) => `${c.name} ${c.args ?? ""}`.length)) + 4;
  return [
    `spool ${version}: a self-hostable, RunPod-compatible queue for inference jobs`,
    "",
    "usage: spool <command> [options]",
    "",
    ...COMMANDS.map((c) => `  ${`${c.name} ${c.args ?? ""}`.padEnd(width)}${c.summary}`),
    "",
    "spool <command> --help (or spool help <command>) shows a command's options; spool --version its version.",
    EXIT_LINE,
  ].join("\n");
}

/** Parses a command's arguments with its spec (unknown options throw ERR_PARSE_ARGS_*, which exit 2). */
export function parseCommand(spec: CommandSpec, args: string[]) {
  const options = Object.fromEntries(Object.entries(spec.options).map(([name, o]) => [name, { type: o.type }]));
  return parseArgs({ args, options, allowPositionals: true, strict: true }) as {
    values: Record<string, string | boolean | undefined>;
    positionals: string[];
  };
}
