import type { HealthResponse } from "../../../runtime/protocol/job-response.ts";
import { ENDPOINT } from "./queue-rig.ts";
import { bearer } from "./spool-http.ts";
import type { SpoolProcess } from "./spool-process.ts";

/** The queue benchmark's HTTP calls to one server: a submitter's and a protocol worker's. */
export function queueClient(server: SpoolProcess) {
  const base = `${server.url}/v2/${ENDPOINT}`;
  const auth = bearer(server.key);
  // Workers send the key bare and a form content type, as runpod-python does.
  const bare = { authorization: server.key, "content-type": "application/x-www-form-urlencoded" };

  async function ok(res: Response, what: string): Promise<Response> {
    if (res.status !== 200 && res.status !== 204) throw new Error(`${what} answered ${res.status}: ${await res.text()}`);
    return res;
  }

  return {
    async run(input: unknown): Promise<string> {
      const res = await ok(await fetch(`${base}/run`, { method: "POST", headers: auth, body: JSON.stringify({ input }) }), "run");
      return ((await res.json()) as { id: string }).id;
    },
    async runsync(input: unknown): Promise<{ status: string; output?: unknown }> {
      const res = await ok(await fetch(`${base}/runsync`, { method: "POST", headers: auth, body: JSON.stringify({ input }) }), "runsync");
      return res.json() as Promise<{ status: string; output?: unknown }>;
    },
    async status(id: string): Promise<string> {
      const res = await ok(await fetch(`${base}/status/${id}`, { headers: auth }), "status");
      return ((await res.json()) as { status: string }).status;
    },
    async health(): Promise<HealthResponse> {
      const res = await ok(await fetch(`${base}/health`, { headers: auth }), "health");
      return res.json() as Promise<HealthResponse>;
    },
    /** An authenticated request that touches the store once and answers 404: the HTTP floor. */
    async missing(): Promise<void> {
      const res = await fetch(`${base}/status/no-such-job`, { headers: auth });
      await res.arrayBuffer();
      if (res.status !== 404) throw new Error(`status of a missing job answered ${res.status}`);
    },
    /** One job-take (size null) or job-take-batch; [] on 204. */
    async take(workerId: string, size: number | null, signal: AbortSignal): Promise<{ id: string }[]> {
      const url =
        size === null
          ? `${base}/job-take/${workerId}?gpu=bench&job_in_progress=0`
          : `${base}/job-take-batch/${workerId}?gpu=bench&batch_size=${size}&job_in_progress=0`;
      const res = await ok(await fetch(url, { headers: bare, signal }), "job-take");
      if (res.status === 204) return [];
      const body = (await res.json()) as { id: string } | { id: string }[];
      return Array.isArray(body) ? body : [body];
    },
    async done(workerId: string, jobId: string, output: unknown = { ok: true }): Promise<void> {
      const res = await fetch(`${base}/job-done/${workerId}/${jobId}?gpu=bench&isStream=false`, {
        method: "POST",
        headers: bare,
        body: JSON.stringify({ output }),
      });
      await ok(res, "job-done");
      await res.arrayBuffer();
    },
  };
}
export type QueueClient = ReturnType<typeof queueClient>;

const isAbort = (e: unknown) => (e as Error)?.name === "AbortError" || (e as Error)?.name === "TimeoutError";

/**
 * Starts `workers` loops of take -> done until `stop` aborts, worker i on clients[i % n]. Calls
 * `onDone` after each job-done is answered. Rejects on the first error that is not the abort.
 */
export function startWorkers(
  clients: QueueClient[],
  workers: number,
  size: number | null,
  stop: AbortSignal,
  onDone: () => void,
  idPrefix = "bench-w",
): Promise<void> {
  const loop = async (c: QueueClient, workerId: string) => {
    while (!stop.aborted) {
      let jobs: { id: string }[];
      try {
        jobs = await c.take(workerId, size, stop);
      } catch (e) {
        if (stop.aborted && isAbort(e)) return;
        throw e;
      }
      // A batch worker runs its jobs concurrently and reports each as it finishes.
      await Promise.all(
        jobs.map(async (j) => {
          await c.done(workerId, j.id);
          onDone();
        }),
      );
    }
  };
  return Promise.all(Array.from({ length: workers }, (_, i) => loop(clients[i % clients.length]!, `${idPrefix}${i}`))).then(() => {});
}
