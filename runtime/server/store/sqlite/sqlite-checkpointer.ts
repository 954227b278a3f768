/**
 * Runs in a worker thread beside the embedded store: copies the write-ahead log into the
 * database file (`wal_checkpoint(PASSIVE)`, which never blocks the server's connection) every
 * `intervalMs`, so that the file syncs a checkpoint needs happen off the thread that answers
 * requests. Started by SqliteStore with { path, intervalMs }; "stop" closes it cleanly.
 */
import { Database } from "bun:sqlite";

declare const self: Worker;

let db: Database | undefined;
let timer: ReturnType<typeof setInterval> | undefined;

self.onmessage = (e: MessageEvent<{ path: string; intervalMs: number } | "stop">) => {
  if (e.data === "stop") {
    clearInterval(timer);
    db?.close();
    process.exit(0);
  }
  const { path, intervalMs } = e.data;
  db = new Database(path);
  db.run("PRAGMA busy_timeout = 5000");
  const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");
  timer = setInterval(() => {
    try {
      checkpoint.run();
    } catch {
      // Busy for a moment: the next tick tries again (the server's own connection still
      // checkpoints past its safety limit).
    }
  }, intervalMs);
};
