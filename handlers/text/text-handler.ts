import { basename, join } from "node:path";
import { defineHandler } from "../../sdk/index.ts";
import { TextEngine } from "./engine.ts";
import { legacyJob } from "./legacy-job.ts";
import { resolveModelPath, validateGguf } from "./model-file.ts";
import { openaiJob } from "./openai-job.ts";
import { isOpenaiInput, textInputSchema } from "./text-input.ts";
import { textOptionsSchema } from "./text-options.ts";

/**
 * Builds the text handler with an engine of its own: `engine()` exposes it (tests read its
 * state), `dispose()` frees it. `dataDir` is where the demo model and downloads go unless
 * options.modelsDir says otherwise.
 */
export function createTextHandler(dataDir: string) {
  let engine: TextEngine | undefined;
  let modelName = "";

  const handler = defineHandler({
    input: textInputSchema,
    options: textOptionsSchema,
    returnAggregateStream: true,
    // As many jobs as the context has sequences, so that they are evaluated together.
    concurrency: () => engine?.settings.sequences ?? 1,
    async setup(options) {
      if (engine) return;
      const modelsDir = options.modelsDir ?? join(dataDir, "models");
      engine = await TextEngine.load(options, async () => {
        const path = await resolveModelPath(options.model, modelsDir);
        await validateGguf(path);
        return path;
      });
      modelName = options.modelName ?? basename(engine.settings.modelPath).replace(/\.gguf$/i, "");
    },
    async *handler(job, ctx) {
      if (!engine) throw new Error("the text handler's setup() has not run");
      if (isOpenaiInput(job.input)) yield* openaiJob(engine, job.input, ctx.options, modelName, job.id, ctx);
      else yield* legacyJob(engine, job.input, ctx.options, ctx);
    },
  });

  return {
    handler,
    engine: () => engine,
    async dispose(): Promise<void> {
      const e = engine;
      engine = undefined;
      await e?.dispose();
    },
  };
}
