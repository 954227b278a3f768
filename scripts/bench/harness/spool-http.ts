import type { HealthResponse } from "../../../runtime/protocol/job-response.ts";

/** Where a Spool server answers and the API key to send. */
export interface SpoolAddress {
  url: string;
  key: string;
  output?: () => string;
}

/** Headers of a client request: the key as a bearer token, a JSON body. */
export const bearer = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" });

/** GET /v2/{endpoint}/health; throws on a status other than 200. */
export async function getHealth(server: SpoolAddress, endpoint: string): Promise<HealthResponse> {
  const res = await fetch(`${server.url}/v2/${endpoint}/health`, { headers: bearer(server.key) });
  if (!res.ok) throw new Error(`health: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as HealthResponse;
}

/** Polls /health every 100 ms until `endpoint` has an idle worker; throws after `timeoutS`. */
export async function waitForIdleWorker(server: SpoolAddress, endpoint: string, timeoutS = 60): Promise<void> {
  for (let i = 0; ; i++) {
    const { workers } = await getHealth(server, endpoint);
    if (workers.idle >= 1) return;
    if (i > timeoutS * 10) {
      throw new Error(`no ${endpoint} worker became idle within ${timeoutS} s${server.output ? `\n${server.output()}` : ""}`);
    }
    await Bun.sleep(100);
  }
}
