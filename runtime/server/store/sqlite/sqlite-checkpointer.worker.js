// Runs in a worker thread beside the embedded store: copies the write-ahead log into the
// database file (`wal_checkpoint(PASSIVE)`, which never blocks the server's connection) every
// `intervalMs`, so that the file syncs a checkpoint needs happen off the thread that answers
// requests. Started by SqliteStore with { path, intervalMs }; "stop" closes it cleanly.
// Plain JavaScript, loaded as text and started from a Blob: that way it is inside a compiled
// server too, where a worker file beside the code would not be found.
import { Database } from "bun:sqlite";

let db;
let timer;

self.onmessage = (e) => {
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
