/** What exitCleanup returns: the cleanup to call at the end, and whether a signal came first. */
export interface ExitCleanup {
  /** Runs the cleanup (once, however often it is called or signalled). */
  run(): Promise<void>;
  /** True once SIGINT or SIGTERM arrived (the signal handler then cleans up and exits 130). */
  readonly interrupted: boolean;
}

/**
 * Makes `cleanup` run once: when the benchmark calls run() at its end, or on SIGINT/SIGTERM, after
 * which the process exits 130. `onExit` runs synchronously on the process's "exit" event, as a
 * last resort for an exit before cleanup ran.
 */
export function exitCleanup(
  cleanup: () => Promise<void>,
  opts: { onSignal?: (sig: NodeJS.Signals) => void; onExit?: () => void } = {},
): ExitCleanup {
  let done = false;
  let interrupted = false;
  const run = async () => {
    if (done) return;
    done = true;
    await cleanup();
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.on(sig, () => {
      interrupted = true;
      opts.onSignal?.(sig);
      void run().finally(() => process.exit(130));
    });
  }
  if (opts.onExit) process.on("exit", opts.onExit);
  return {
    run,
    get interrupted() {
      return interrupted;
    },
  };
}

/**
 * Runs a benchmark's `main`; on an error prints `NAME failed: STACK` and what `report` adds (the
 * children's output), and sets exit code 1; always runs the cleanup. After a signal it leaves the
 * exit to the signal handler.
 */
export async function runBench(name: string, main: () => Promise<void>, cleanup: ExitCleanup, report?: () => string[]): Promise<void> {
  try {
    await main();
  } catch (e) {
    if (cleanup.interrupted) await new Promise(() => {}); // the signal handler cleans up and exits
    console.error(`${name} failed: ${(e as Error).stack ?? e}`);
    for (const o of report?.() ?? []) console.error(o);
    process.exitCode = 1;
  } finally {
    await cleanup.run();
  }
}
