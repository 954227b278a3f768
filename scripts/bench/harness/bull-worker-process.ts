#!/usr/bin/env bun
/**
 * One BullMQ Worker in a process of its own (the queue benchmark starts several), with a no-op
 * processor of `concurrency`, until SIGTERM. Prints "ready" once connected.
 *
 *   bun scripts/bench/harness/bull-worker-process.ts <redis port> <queue name> <concurrency>
 */
import { Worker } from "bullmq";

const [port, name, concurrency] = Bun.argv.slice(2) as [string, string, string];
const connection = { host: "127.0.0.1", port: Number(port), maxRetriesPerRequest: null };
const worker = new Worker(name, async () => ({ ok: true }), { connection, concurrency: Number(concurrency) });
worker.on("error", (err) => console.error(`bull worker: ${err.message}`));
await worker.waitUntilReady();
console.log("ready");
process.on("SIGTERM", async () => {
  await worker.close();
  process.exit(0);
});
