import type { Context } from "hono";
import type { AppEnv } from "../app-deps.ts";

/** The content type c.json writes. */
const JSON_TYPE = { "content-type": "application/json" };

/** A 200 answer of JSON written already as text (c.json's content type), e.g. with a large field spliced in as stored. */
export const jsonText = (c: Context<AppEnv>, text: string) => c.body(text, 200, JSON_TYPE);

/** The same answer without a Hono context (the job routes). */
export const jsonTextResponse = (text: string) => new Response(text, { headers: JSON_TYPE });
