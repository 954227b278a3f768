import { isHandlerSource } from "../executable.ts";
import { loadHandler } from "../worker/handler-loader.ts";
import { workerMain } from "../worker/worker-main.ts";
import { cannotStart } from "../worker/start-failure.ts";

/** `spool worker <handler.ts | binary> --url URL --endpoint ID --api-key KEY` (or RunPod's env). */
export async function workerCommand(args: string[]): Promise<number> {
  const [target, ...flags] = args;
  if (!target) {
    console.error("usage: spool worker <handler.ts | binary> --url URL --endpoint ID --api-key KEY");
    return 2;
  }
  if (!isHandlerSource(target)) {
    // A binary from `spool build` is a whole worker: run it with the same flags.
    const child = Bun.spawn([target, ...flags], { stdio: ["inherit", "inherit", "inherit"] });
    for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => child.kill(sig));
    return child.exited;
  }
  let handler: Awaited<ReturnType<typeof loadHandler>>;
  try {
    handler = await loadHandler(target);
  } catch (err) {
    return cannotStart(err); // a missing file or a syntax error does not mend itself on a retry
  }
  return workerMain(handler, flags, ["worker", target, ...flags]);
}

/** `spool run <handler> [--input '<json>']`: one job, output on stdout, non-zero exit on failure. */
export async function runCommand(positionals: string[], flags: { input?: string }): Promise<number> {
  const target = positionals[0];
  if (!target) {
    console.error("usage: spool run <handler.ts> [--input '<json>']  (or ./test_input.json)");
    return 2;
  }
  const handler = await loadHandler(target);
  return workerMain(handler, flags.input === undefined ? [] : ["--input", flags.input], [], {
    ...process.env,
    RUNPOD_WEBHOOK_GET_JOB: undefined,
  });
}
