import type { Context } from "hono";
import type { AppEnv } from "../app-deps.ts";

/** A 200 answer of JSON written already as text (c.json's content type), e.g. with a large field spliced in as stored. */
export const jsonText = (c: Context<AppEnv>, text: string) => c.body(text, 200, { "content-type": "application/json" });
