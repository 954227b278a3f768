import type { MiddlewareHandler } from "hono";
import { getQueryParam, tryDecodeURIComponent } from "hono/utils/url";
import { findEndpoint, type EndpointConfig } from "../../config/config.ts";
import type { RateLimitedOperation } from "../../protocol/limits.ts";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config/config.ts";
import type { JobEvents } from "../jobs/job-events.ts";
import type { WorkerKeys } from "../keys/worker-keys.ts";
import type { AppEnv } from "./app-env.ts";
import { HttpError } from "./http-error.ts";
import { keyFromHeader } from "../keys/api-keys.ts";
import { KeyCache } from "../keys/key-cache.ts";
import { admitRequest } from "../limits/rate-limiter.ts";
import { andThen, type MaybePromise } from "../../maybe-promise.ts";
import type { ApiKeyRecord, Store } from "../store/store.ts";
import type { Call, Next, Release, Step } from "./pipeline.ts";

/** Operations a read-only key may call (all GET). */
const READ_ONLY = new Set(["status", "status-sync", "stream", "logs", "health", "requests", "scaling"]);
/** The worker protocol: a worker key may call only these, a client key none of them. */
const WORKER_OPS = new Set(["job-take", "job-take-batch", "job-done", "job-stream", "job-log", "ping", "job-stop", "job-files"]);

/**
 * GET routes that take, consume or wait: a HEAD of them is refused (405), since its answer has
 * no body and a HEAD must change nothing (a HEAD of job-take would hand out a job no worker gets).
 */
const NO_HEAD = new Set(["job-take", "job-take-batch", "job-stop", "ping", "stream", "status-sync", "openai", "compat"]);

/** Which rate-limited operation a path segment is. */
const LIMITED: ReadonlyMap<string, RateLimitedOperation> = new Map(
  Object.entries({
    runsync: "runsync",
    run: "run",
    status: "status",
    "status-sync": "status",
    stream: "stream",
    cancel: "cancel",
    "purge-queue": "purge-queue",
    openai: "openai",
    compat: "openai",
    requests: "requests",
  } satisfies Record<string, RateLimitedOperation>),
);

/** What the access checks read: keys and rate limits from the store, the server's own workers' keys. */
export interface AccessDeps {
  store: Store;
  config: Config;
  clock: Clock;
  /** Told of each request refused for its rate limit. */
  jobEvents: JobEvents;
  workerKeys?: WorkerKeys;
}

/**
 * The checks of a request's key, endpoint, scope and rate limits, as plain functions of the
 * request's parts: the app's access step (checkAccess, below) makes them for every /v2 request,
 * and `authenticate` checks the key of the routes outside /v2 that need one.
 */
export class Access {
  readonly #deps: AccessDeps;
  readonly #keys: KeyCache;

  constructor(deps: AccessDeps) {
    this.#deps = deps;
    this.#keys = new KeyCache(deps.store, deps.clock, deps.store.events);
  }

  /**
   * The API key of an Authorization header (Bearer or bare), at once when the key is cached; 401
   * (thrown, or the promise rejected) when missing, unknown or revoked.
   */
  key(header: string | undefined): MaybePromise<ApiKeyRecord> {
    const key = keyFromHeader(header);
    if (!key) throw new HttpError(401, "missing API key: send Authorization: Bearer <key>");
    return this.#deps.workerKeys?.find(key) ?? andThen(this.#keys.find(key), usable);
  }

  /**
   * The endpoint of a request to /v2/<endpointId>/<op>/..., checked: it exists (404), the key may
   * use it and this operation (401, saying why), and a HEAD only where it changes nothing (405).
   */
  endpoint(
    key: ApiKeyRecord,
    endpointId: string,
    op: string,
    req: { method: string; path: string; hasTtl: () => boolean },
  ): EndpointConfig {
    const { method } = req;
    // A key limited to endpoints learns nothing of the others, not even whether they exist.
    if (key.endpoints && !key.endpoints.includes(endpointId)) {
      throw new HttpError(401, `this API key is restricted to endpoints ${key.endpoints.join(", ")}`);
    }
    const endpoint = findEndpoint(this.#deps.config, endpointId);
    if (!endpoint) throw new HttpError(404, `endpoint ${endpointId} not found`);
    const refusal = scopeRefusal(key.scope, method, op);
    if (refusal) throw new HttpError(401, refusal);
    if (method === "HEAD" && (NO_HEAD.has(op) || (op === "status" && req.hasTtl()))) {
      const allow = (op === "openai" || op === "compat") && !req.path.endsWith("/models") ? "POST" : "GET";
      throw new HttpError(405, `HEAD is not supported on ${op}${op === "status" ? " with ?ttl" : ""}; use ${allow}`, { allow });
    }
    return endpoint;
  }

  /**
   * Admits a request of `op` against the endpoint's rate limits (429 with Retry-After): the
   * function that gives its slot back, or null when `op` is not limited.
   */
  admit(endpointId: string, endpoint: EndpointConfig, op: string): MaybePromise<Release | null> {
    const limited = LIMITED.get(op);
    if (!limited) return null;
    const deps = this.#deps;
    return andThen(
      admitRequest(deps.store, endpointId, limited, endpoint.rateLimits, deps.config.server.rateWindowMs, deps.clock.now()),
      (admission) => {
        if (!admission.ok) {
          deps.jobEvents.emit({ type: "refused", endpointId, reason: "rate-limit" });
          throw new HttpError(429, admission.reason, { "retry-after": String(admission.retryAfterSeconds) });
        }
        return admission.release;
      },
    );
  }
}

function usable(record: ApiKeyRecord | null): ApiKeyRecord {
  if (!record || record.revokedAt !== undefined) throw new HttpError(401, "invalid or revoked API key");
  return record;
}

/** Resolves the API key (Bearer or bare); 401 when missing, unknown or revoked (routes outside /v2). */
export function authenticate(deps: AccessDeps, access = new Access(deps)): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    c.set("key", await access.key(c.req.header("authorization")));
    await next();
  };
}

/**
 * The access step of every /v2 request: the API key first (401), so that an unknown key learns
 * nothing about jobs or endpoints; then, under /v2/<endpoint>/, that the endpoint exists (404),
 * that the key may use it and this operation (401, saying why), and the operation's rate limits
 * (429 with Retry-After), holding the admitted slot until the answer is back (or, for a stream,
 * until the route that took it over gives it back).
 */
export function checkAccess(access: Access): Step {
  // Plain functions rather than async ones: a cached key and an admission counted in memory come
  // back at once, and the request goes on without waiting a turn for either.
  const admitted = (call: Call, next: Next, key: ApiKeyRecord): Promise<Response> => {
    call.key = key;
    const path = call.path;
    const slash = path.indexOf("/", 4);
    const segment = slash === -1 ? path.slice(4) : path.slice(4, slash);
    if (!segment) return next(call);
    const endpointId = tryDecodeURIComponent(segment);
    const opEnd = slash === -1 ? -1 : path.indexOf("/", slash + 1);
    const op = slash === -1 ? "" : opEnd === -1 ? path.slice(slash + 1) : path.slice(slash + 1, opEnd);
    const url = call.req.url;
    const endpoint = access.endpoint(key, endpointId, op, {
      method: call.req.method,
      path,
      hasTtl: () => getQueryParam(url, "ttl") !== undefined,
    });
    call.endpointId = endpointId;
    const release = access.admit(endpointId, endpoint, op);
    if (release instanceof Promise) return release.then((r) => (r ? holding(call, next, r) : next(call)));
    return release ? holding(call, next, release) : next(call);
  };
  return (call, next) => {
    const path = call.path;
    if (!path.startsWith("/v2/") && path !== "/v2") return next(call);
    const key = access.key(call.req.headers.get("authorization") ?? undefined);
    return key instanceof Promise ? key.then((k) => admitted(call, next, k)) : admitted(call, next, key);
  };
}

/** The answer of an admitted request, its slot given back once it is answered, unless a stream took the slot over. */
async function holding(call: Call, next: Next, release: Release): Promise<Response> {
  let handedOver = false;
  call.keepAdmission = () => {
    handedOver = true;
    return release;
  };
  try {
    return await next(call);
  } finally {
    if (!handedOver) {
      const released = release();
      if (released) await released;
    }
  }
}

/** Why a key of `scope` may not call `op`, or null when it may. */
function scopeRefusal(scope: string, method: string, op: string): string | null {
  const route = op || "this route";
  const isWorkerOp = WORKER_OPS.has(op);
  switch (scope) {
    case "full":
      return null;
    case "client":
      return isWorkerOp ? `this API key is a client key; ${route} is a worker route and needs a worker key` : null;
    case "worker":
      return isWorkerOp ? null : `this API key is a worker key; ${route} needs a client key`;
    case "read-only":
      return method === "GET" && READ_ONLY.has(op)
        ? null
        : `this API key is read-only (status, stream, logs, health, requests, scaling); ${route} needs a client key`;
    default:
      return `this API key has an unknown scope ${scope}`;
  }
}
