import { Scalar } from "@scalar/hono-api-reference";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../app-deps.ts";
import { buildOpenApiDocument } from "./openapi-document.ts";

/**
 * Scalar's browser bundle (MIT), served by this server so the docs page needs no CDN: a file import,
 * so `bun build --compile` embeds it (its path is then inside the executable). A copy of
 * @scalar/api-reference's dist/browser/standalone.js, vendored (vendor/README.md) because that
 * package's own dependencies (Vue and the rest of its editor, ~200 MB) are of no use to a server
 * that only serves this file; test/server/openapi/scalar-bundle.test.ts checks it is the
 * devDependency's.
 */
// @ts-expect-error a file import: Bun gives its path, which TypeScript cannot know of a .js file
import SCALAR_JS from "../../../vendor/scalar/standalone.js" with { type: "file" };

/**
 * GET /openapi.json (OpenAPI 3.1, built once per server from the protocol schemas and each
 * endpoint handler's input schema), GET /docs (Scalar's API reference of it) and the script the
 * page loads, from this server only. All three are public, like the API they describe.
 */
export function openapiRoutes(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  let document: Promise<Record<string, unknown>> | undefined;

  app.get("/openapi.json", async (c) => {
    document ??= buildOpenApiDocument(deps.config, deps.inputSchemas);
    return c.json(await document);
  });
  app.get(
    "/docs",
    Scalar({
      url: "/openapi.json",
      cdn: "/docs/scalar.js",
      pageTitle: "Spool API",
      // No fonts from Scalar's servers: the page works without internet access.
      withDefaultFonts: false,
      hideClientButton: true,
      telemetry: false,
      // Scalar's AI agent asks api.scalar.com for documents; a self-hosted server does not call out.
      agent: { disabled: true },
    }),
  );
  app.get("/docs/scalar.js", () => {
    return new Response(Bun.file(SCALAR_JS), {
      headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600" },
    });
  });
  return app;
}
