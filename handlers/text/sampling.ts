import type { GenerateRequest } from "./engine.ts";

/** Sampling fields as both input forms spell them (OpenAI's may be null). */
export interface SamplingFields {
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  stop?: string | string[] | null;
  seed?: number | null;
}

/** The engine's sampling settings, with vLLM's defaults: temperature 1, top_p 1, no top_k. */
export function samplingFrom(p: SamplingFields, defaultMaxTokens: number): Omit<GenerateRequest, "input" | "signal"> {
  return {
    maxTokens: p.max_tokens ?? defaultMaxTokens,
    temperature: p.temperature ?? 1,
    topP: p.top_p ?? 1,
    topK: p.top_k && p.top_k > 0 ? p.top_k : 0,
    stop: p.stop == null ? [] : Array.isArray(p.stop) ? p.stop : [p.stop],
    seed: p.seed ?? undefined,
  };
}
