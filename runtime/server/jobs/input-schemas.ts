import type { z } from "zod";
import { isHandlerSource } from "../../executable.ts";
import { findEndpoint, type Config } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import type { MaybePromise } from "../../maybe-promise.ts";
import { hasHandlerKind } from "../../protocol/handler-kind.ts";

/**
 * The input schema of each endpoint whose handler is a source file, so that /run and /runsync
 * refuse invalid input with 400 before it is queued. Handler modules are imported here, once:
 * they must do their heavy loading in setup(), not at import. Built binaries are validated by
 * their worker instead (the job ends FAILED with the same message).
 */
export class InputSchemas {
  readonly #loading = new Map<string, Promise<z.ZodType | undefined>>();
  /** Schemas loaded (undefined: the endpoint has none), answered without waiting. */
  readonly #loaded = new Map<string, z.ZodType | undefined>();

  constructor(
    private readonly config: Config,
    private readonly log: Log,
  ) {}

  /** Starts loading every schema now, so the first request does not wait for an import. */
  warm(): void {
    for (const id of Object.keys(this.config.endpoints)) void this.get(id);
  }

  /** The endpoint's input schema (undefined: none), at once once loaded. */
  get(endpointId: string): MaybePromise<z.ZodType | undefined> {
    if (this.#loaded.has(endpointId)) return this.#loaded.get(endpointId);
    let p = this.#loading.get(endpointId);
    if (!p) {
      const handler = findEndpoint(this.config, endpointId)?.handler;
      p = (handler && isHandlerSource(handler) ? this.#load(endpointId, handler) : Promise.resolve(undefined)).then((schema) => {
        this.#loaded.set(endpointId, schema);
        return schema;
      });
      this.#loading.set(endpointId, p);
    }
    return p;
  }

  async #load(endpointId: string, path: string): Promise<z.ZodType | undefined> {
    try {
      const mod = (await import(path)) as { default?: unknown };
      return hasHandlerKind(mod.default) ? (mod.default.input as z.ZodType | undefined) : undefined;
    } catch (err) {
      this.log.warn("could not load the handler's input schema; input is checked by the worker", { endpointId, error: String(err) });
      return undefined;
    }
  }
}
