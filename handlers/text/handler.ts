import { createTextHandler } from "./text-handler.ts";

/**
 * The bundled text handler: a GGUF chat model in llama.cpp, worker-vllm's job input and
 * output, streaming with engine metrics, and the bodies of the OpenAI-compatible routes.
 * Workers get the data dir in SPOOL_DATA_DIR (the demo model is generated there).
 */
export default createTextHandler(process.env.SPOOL_DATA_DIR ?? ".data").handler;
