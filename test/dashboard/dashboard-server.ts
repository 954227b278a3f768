import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { defineHandler } from "../../sdk/index.ts";
import fast from "../../handlers/image/fast.ts";
import { createTextHandler } from "../../handlers/text/text-handler.ts";
import { textOptionsSchema } from "../../handlers/text/text-options.ts";
import echo from "../../handlers/examples/echo.ts";
import slow from "../../handlers/examples/slow.ts";
import { makeTinyModels, tinyOptions, type TinyModels } from "../handlers/image/tiny-models.ts";
import { tinyModelDir, TEXT_HANDLER } from "../handlers/text/text-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { startLoop, type TestLoop } from "../helpers/worker-loop.ts";

const root = resolve(import.meta.dir, "../..");
const unlimited = { requests: { requests: 1_000_000 } };

/**
 * Words released one at a time by the test: a stream whose chunks arrive exactly when the test
 * says, so "tokens arrive" is seen without depending on how fast a model is.
 */
export class WordGate {
  #waiting: Array<() => void> = [];
  #credit = 0;
  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#credit++;
  }
  next(): Promise<void> {
    if (this.#credit > 0) {
      this.#credit--;
      return Promise.resolve();
    }
    return new Promise((r) => this.#waiting.push(r));
  }
}

export interface DashboardServer extends AsyncDisposable {
  srv: TestServer;
  readOnlyKey: string;
  /** A key restricted to the endpoint echo. */
  echoKey: string;
  gate: WordGate;
}

/**
 * A real server with the endpoints echo, slow, gated (words released by the test), image-fast
 * (the real handler on a tiny model) and text (the real handler on a tiny GGUF), each with a
 * real worker loop speaking HTTP to it.
 */
export async function startDashboardServer(): Promise<DashboardServer> {
  const models: TinyModels = await makeTinyModels();
  const gguf = tinyModelDir();
  const textOptions = { model: gguf.model, sequences: 2, contextSize: 512, inputPricePerMillion: 0.5, outputPricePerMillion: 1.5 };
  const srv = await startTestServer({
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 0, scaleIntervalMs: 3_600_000 },
    endpoints: {
      echo: { handler: join(root, "handlers/examples/echo.ts"), workersMax: 0, rateLimits: unlimited },
      slow: { handler: join(root, "handlers/examples/slow.ts"), workersMax: 0, rateLimits: unlimited },
      gated: { workersMax: 0, rateLimits: unlimited },
      "image-fast": {
        handler: join(root, "handlers/image/fast.ts"),
        workersMax: 0,
        options: tinyOptions(models, "fast"),
        rateLimits: unlimited,
      },
      text: { handler: TEXT_HANDLER, workersMax: 0, options: textOptions, rateLimits: unlimited },
    },
  });
  mkdirSync(srv.dataDir, { recursive: true });
  const now = srv.clock.now();
  const readOnlyKey = (await createKey(srv.store, "viewer", now, { scope: "read-only" })).key;
  const echoKey = (await createKey(srv.store, "echo-only", now, { scope: "client", endpoints: ["echo"] })).key;
  const gate = new WordGate();
  const gated = defineHandler({
    input: z.object({ text: z.string() }),
    returnAggregateStream: true,
    async *handler(job) {
      for (const word of job.input.text.split(/\s+/)) {
        await gate.next();
        yield `${word} `;
      }
    },
  });
  const text = createTextHandler(gguf.dir);
  const loops: TestLoop[] = [
    startLoop(srv, echo, { endpoint: "echo" }),
    startLoop(srv, slow, { endpoint: "slow" }),
    startLoop(srv, gated, { endpoint: "gated" }),
    startLoop(srv, fast, { endpoint: "image-fast", handlerOptions: tinyOptions(models, "fast") }),
    startLoop(srv, text.handler, { endpoint: "text", handlerOptions: textOptionsSchema.parse(textOptions) }),
  ];
  return {
    srv,
    readOnlyKey,
    echoKey,
    gate,
    async [Symbol.asyncDispose]() {
      for (let i = 0; i < 100; i++) gate.release(); // let a gated job end so its worker drains
      for (const loop of loops) await loop[Symbol.asyncDispose]();
      await text.dispose();
      await srv[Symbol.asyncDispose]();
      models.remove();
      gguf[Symbol.dispose]();
    },
  };
}
