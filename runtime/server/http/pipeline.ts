import type { ApiKeyRecord } from "../store/store.ts";
import type { MaybePromise } from "../../maybe-promise.ts";

/** Gives an admitted request's slot back (at once where the count is in memory). */
export type Release = () => MaybePromise<void>;

/**
 * A request on its way through the app's steps, with what the steps before have found out: the
 * route, the key, the endpoint. The last step answers it.
 */
export interface Call {
  /** The request; the host step replaces it with the URL its client called behind a trusted proxy. */
  req: Request;
  /** What Bun.serve passed beside the request: the peer's address comes from it. */
  readonly peer: unknown;
  /** The path without its query, decoded as Hono's router decodes it. */
  path: string;
  /** The matched route's template (e.g. /v2/:endpoint/status/:id), or "unmatched": a bounded label set. */
  route: string;
  /** The matched route's answer when it is one of the job routes, which are answered without Hono. */
  answer?: (call: Call) => Promise<Response>;
  /** The request's API key, once the access step has checked it. */
  key?: ApiKeyRecord;
  /** The endpoint of a /v2/<endpoint>/... request, once the access step has checked it. */
  endpointId?: string;
  /**
   * For a response that streams on after the route returns (SSE): takes over the request's
   * concurrency slot, returning the function that gives it back when the stream ends.
   */
  keepAdmission?: () => Release;
}

/** The rest of the list after a step: what it answers for the call. */
export type Next = (call: Call) => Promise<Response>;

/**
 * One step every request passes, in the app's one list: it answers the request itself or hands
 * the call on with `next(call)`, and may look at the answer that comes back.
 */
export type Step = (call: Call, next: Next) => Promise<Response>;

/** The steps composed once, in order, in front of `end`: no function is made per request. */
export function pipeline(steps: readonly Step[], end: Next): Next {
  return steps.reduceRight<Next>((next, step) => (call) => step(call, next), end);
}
