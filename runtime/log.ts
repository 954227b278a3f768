import { tracing } from "./telemetry/tracing.ts";

/** Structured log lines (JSON, one per line, to stderr). Never pass keys or s3Config here. */
export interface Log {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

// Bound at load, before a worker's OutputCapture patches process.stderr: the process's own log
// lines are not a job's output.
const writeStderr = process.stderr.write.bind(process.stderr);

function line(level: string, msg: string, fields?: Record<string, unknown>): void {
  // With traces on, a line written in a span names it (trace_id, span_id).
  const ids = tracing?.active();
  writeStderr(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields, ...ids })}\n`);
}

export const stderrLog: Log = {
  info: (m, f) => line("info", m, f),
  warn: (m, f) => line("warn", m, f),
  error: (m, f) => line("error", m, f),
};

/** Discards everything: for tests that assert on behaviour, not logs. */
export const silentLog: Log = { info() {}, warn() {}, error() {} };

/** Keeps lines in memory so tests can check what was (and was not) logged. */
export class MemoryLog implements Log {
  readonly lines: string[] = [];
  info(m: string, f?: Record<string, unknown>) {
    this.lines.push(JSON.stringify({ level: "info", msg: m, ...f }));
  }
  warn(m: string, f?: Record<string, unknown>) {
    this.lines.push(JSON.stringify({ level: "warn", msg: m, ...f }));
  }
  error(m: string, f?: Record<string, unknown>) {
    this.lines.push(JSON.stringify({ level: "error", msg: m, ...f }));
  }
}
