import type { ApiKeyRecord } from "../store/store.ts";

/** Values the middleware puts on each request's context. */
export interface AppEnv {
  Variables: {
    key: ApiKeyRecord;
    endpointId: string;
    /**
     * For a response that streams on after the handler returns (SSE): takes over the request's
     * concurrency slot, returning the function that gives it back when the stream ends.
     */
    keepAdmission?: () => () => void | Promise<void>;
  };
}
