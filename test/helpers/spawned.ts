import type { Subprocess } from "bun";
import { join, resolve } from "node:path";

const CLI = join(resolve(import.meta.dir, "../.."), "runtime/cli.ts");

export interface Spawned extends AsyncDisposable {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything printed so far, stdout and stderr, line by line. */
  lines: string[];
  /** Resolves with the first match of `pattern` in the output, waiting for it to be printed. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
}

/** Spawns a process whose output is collected; disposing ends it (SIGTERM, then SIGKILL). */
export function spawnProcess(cmd: string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Spawned {
  const proc = Bun.spawn(cmd, { env: options.env ?? process.env, cwd: options.cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const lines: string[] = [];
  let wake: () => void = () => {};
  let ended = false;
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let buf = "";
    const decoder = new TextDecoder();
    for await (const bytes of stream) {
      buf += decoder.decode(bytes, { stream: true });
      const parts = buf.split("\n");
      buf = parts.pop()!;
      lines.push(...parts);
      wake();
    }
    if (buf) lines.push(buf);
    wake();
  };
  const pumps = Promise.all([pump(proc.stdout), pump(proc.stderr)]).then(() => {
    ended = true;
    wake();
  });
  return {
    proc,
    lines,
    async waitFor(pattern) {
      for (;;) {
        for (const line of lines) {
          const m = line.match(pattern);
          if (m) return m;
        }
        if (ended) throw new Error(`process ended without printing ${pattern}:\n${lines.join("\n")}`);
        await new Promise<void>((r) => (wake = r));
      }
    },
    async [Symbol.asyncDispose]() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const killer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
        await proc.exited;
        clearTimeout(killer);
      }
      await pumps;
    },
  };
}

/**
 * `spool worker <handler>` from source, taking the jobs of a server's endpoint (`echo` unless
 * given), as a user starts it: the supervisor and its worker process, output collected.
 */
export function spawnSpoolWorker(
  handler: string,
  server: { url: string; key: string },
  options: { endpoint?: string; workerId?: string; env?: Record<string, string | undefined> } = {},
): Spawned {
  const cmd = [
    process.execPath,
    CLI,
    "worker",
    handler,
    "--url",
    server.url,
    "--endpoint",
    options.endpoint ?? "echo",
    "--api-key",
    server.key,
  ];
  if (options.workerId !== undefined) cmd.push("--worker-id", options.workerId);
  return spawnProcess(cmd, { env: options.env });
}
