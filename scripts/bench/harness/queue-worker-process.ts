#!/usr/bin/env bun
/**
 * One Spool protocol worker in a process of its own (the queue benchmark starts several):
 * job-take (or job-take-batch of `size`, running the batch's jobs concurrently) -> job-done over
 * HTTP until SIGTERM. Prints "ready" once started.
 *
 *   bun scripts/bench/harness/queue-worker-process.ts <url> <key> <worker id> <size: 0 = job-take>
 */
import { queueClient, startWorkers } from "./queue-client.ts";

const [url, key, workerId, size] = Bun.argv.slice(2) as [string, string, string, string];
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
const client = queueClient({ url, key } as Parameters<typeof queueClient>[0]);
const loop = startWorkers([client], 1, Number(size) || null, stop.signal, () => {}, workerId);
console.log("ready");
await loop;
process.exit(0);
