import { format } from "node:util";
import type { LogLevel } from "../protocol/job-log.ts";

/** Where captured lines go: the one running job's log. */
export type LineSink = (level: LogLevel, message: string) => void;

const CONSOLE_LEVELS = { debug: "debug", log: "info", info: "info", warn: "warn", error: "error", trace: "debug" } as const;

/**
 * Copies what a worker process's code prints — console.* calls and writes to process.stdout and
 * process.stderr — to `sink` while one is set, a line at a time; the output still goes where it
 * went. Output written below JavaScript (a native library's printf) is not seen here.
 */
export class OutputCapture {
  #sink: LineSink | undefined;
  readonly #partial = { stdout: "", stderr: "" };
  #restore: (() => void) | undefined;

  /** Sets (or with undefined, clears) where lines go; a line left unfinished goes to the old sink first. */
  set sink(sink: LineSink | undefined) {
    if (sink === this.#sink) return;
    this.#endLines();
    this.#sink = sink;
  }

  /** Patches console and the process's stdout and stderr; returns the function that undoes it. */
  install(): () => void {
    if (this.#restore) return this.#restore;
    const undo: (() => void)[] = [];
    for (const [method, level] of Object.entries(CONSOLE_LEVELS)) {
      const original = (console as any)[method] as (...args: unknown[]) => void;
      (console as any)[method] = (...args: unknown[]) => {
        this.#sink?.(level, method === "trace" ? `Trace: ${format(...args)}` : format(...args));
        return original.apply(console, args);
      };
      undo.push(() => ((console as any)[method] = original));
    }
    for (const stream of ["stdout", "stderr"] as const) {
      const target = process[stream];
      const original = target.write;
      const decoder = new TextDecoder();
      target.write = ((chunk: unknown, ...rest: unknown[]) => {
        if (this.#sink)
          this.#text(
            stream,
            typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? decoder.decode(chunk, { stream: true }) : String(chunk),
          );
        return (original as (...a: unknown[]) => boolean).call(target, chunk, ...rest);
      }) as typeof target.write;
      undo.push(() => (target.write = original));
    }
    this.#restore = () => {
      for (const u of undo) u();
      this.#restore = undefined;
    };
    return this.#restore;
  }

  #text(stream: "stdout" | "stderr", text: string): void {
    const all = this.#partial[stream] + text;
    const lines = all.split("\n");
    this.#partial[stream] = lines.pop()!;
    for (const line of lines) this.#sink?.(stream, line);
  }

  #endLines(): void {
    for (const stream of ["stdout", "stderr"] as const) {
      const rest = this.#partial[stream];
      this.#partial[stream] = "";
      if (rest) this.#sink?.(stream, rest);
    }
  }
}
