import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createTextHandler } from "../../../handlers/text/text-handler.ts";
import { textOptionsSchema, type TextOptions } from "../../../handlers/text/text-options.ts";
import { writeTinyGguf } from "../../../handlers/text/tiny-gguf.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { startLoop, type TestLoop } from "../../helpers/worker-loop.ts";

export const TEXT_HANDLER = resolve(import.meta.dir, "../../../handlers/text/handler.ts");

/** A temp dir holding a freshly generated tiny GGUF; removed on dispose. */
export function tinyModelDir(): { dir: string; model: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "spool-text-"));
  const model = writeTinyGguf(join(dir, "tiny.gguf"));
  return { dir, model, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TextServer extends AsyncDisposable {
  srv: TestServer;
  worker: TestLoop;
  text: ReturnType<typeof createTextHandler>;
  options: TextOptions;
  model: string;
}

/**
 * A real queue server with the endpoint `text` (handler handlers/text/handler.ts, so input is
 * checked at submission) and a real WorkerLoop in this process running the text handler on a
 * tiny generated GGUF.
 */
export async function startTextServer(
  options: Record<string, unknown> = {},
  rateLimits: Record<string, unknown> = {},
): Promise<TextServer> {
  const files = tinyModelDir();
  // Batches close by count only here, whatever the machine's speed (the time flush has tests of its own).
  const raw = {
    model: files.model,
    sequences: 4,
    contextSize: 512,
    inputPricePerMillion: 0.5,
    outputPricePerMillion: 1.5,
    streamFlushMs: 10_000,
    ...options,
  };
  const srv = await startTestServer({
    // Long-polls wake on events, so parked takes and stop polls cost no time.
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 0, scaleIntervalMs: 3_600_000 },
    endpoints: {
      text: { handler: TEXT_HANDLER, workersMax: 0, options: raw, rateLimits: { requests: { requests: 1_000_000 }, ...rateLimits } },
    },
  });
  const text = createTextHandler(files.dir);
  const parsed = textOptionsSchema.parse(raw);
  const worker = startLoop(srv, text.handler, { endpoint: "text", handlerOptions: parsed });
  return {
    srv,
    worker,
    text,
    options: parsed,
    model: files.model,
    async [Symbol.asyncDispose]() {
      await worker[Symbol.asyncDispose]();
      await text.dispose();
      await srv[Symbol.asyncDispose]();
      files[Symbol.dispose]();
    },
  };
}
