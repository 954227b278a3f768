import { Hono } from "hono";
import type { FileUploadResponse } from "../../protocol/worker-wire.ts";
import type { AppDeps, AppEnv } from "../app-deps.ts";
import { HttpError } from "../http/http-error.ts";
import { limitBody, requestOrigin } from "../http/request-input.ts";
import type { FileStore, LocalFileStore } from "../files/file-store.ts";
import { KNOWN_ONLY, type WorkerPresence } from "../jobs/worker-presence.ts";

const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;

/** PUT /v2/<ep>/job-files/<worker>/<job>/<name>: a worker stores a job's file; answers {url}. */
export function fileUploadRoutes(deps: AppDeps, files: FileStore, presence: WorkerPresence): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.put("/job-files/:worker/:job/:name", limitBody(MAX_UPLOAD_BYTES), async (c) => {
    const { worker, job: jobId, name } = c.req.param();
    await presence.touch(worker, c.get("endpointId"), c.get("key").id, deps.clock.now(), KNOWN_ONLY); // 404 for another key's worker
    const job = await deps.store.get(c.get("endpointId"), jobId, deps.clock.now());
    if (!job || job.status !== "IN_PROGRESS" || job.workerId !== worker) {
      throw new HttpError(404, `job ${jobId} is not running on worker ${worker}`);
    }
    const data = await c.req.blob();
    const type = c.req.header("content-type") ?? "application/octet-stream";
    // Where the client that submitted the job can fetch it: the worker may have come another way.
    const origin = deps.config.server.publicUrl ?? job.origin ?? deps.scaler?.origin ?? requestOrigin(c.req.url);
    let url: string;
    try {
      url = await files.put(c.get("endpointId"), jobId, name, data, type, deps.clock.now(), origin);
    } catch (err) {
      const message = (err as Error).message;
      if (message.startsWith("invalid upload name")) throw new HttpError(400, message);
      throw err;
    }
    return c.json({ url } satisfies FileUploadResponse);
  });
  return app;
}

/** GET /files/<ep>/<job>/<name>?expires=&sig=: public, authorised by the URL's signature. */
export function fileDownloadRoutes(deps: AppDeps, files: LocalFileStore): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/:endpoint/:job/:name", (c) => {
    const { endpoint, job, name } = c.req.param();
    const found = files.get(endpoint, job, name, Number(c.req.query("expires")), c.req.query("sig") ?? "", deps.clock.now());
    if (!found) throw new HttpError(403, "this file URL is invalid or has expired");
    return new Response(found.file, {
      headers: {
        "content-type": found.type,
        "cache-control": "private, max-age=3600",
        // Files are what workers chose to upload: never let one run as a page of this origin.
        "x-content-type-options": "nosniff",
        "content-security-policy": "sandbox; default-src 'none'",
      },
    });
  });
  return app;
}
