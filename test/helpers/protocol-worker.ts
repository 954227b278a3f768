import type { TestServer } from "./test-server.ts";

/** Speaks the worker protocol by hand, as runpod-python does (bare key, form content type). */
export function protocolWorker(srv: TestServer, endpoint: string, workerId: string) {
  const base = `/v2/${endpoint}`;
  const headers = { "content-type": "application/x-www-form-urlencoded" };
  const post = (path: string, body: unknown) =>
    srv.call("POST", path, typeof body === "string" ? body : JSON.stringify(body), { auth: srv.key, headers });
  return {
    id: workerId,
    async take(): Promise<any | null> {
      const res = await srv.call("GET", `${base}/job-take/${workerId}?gpu=test&job_in_progress=0`, undefined, { auth: srv.key });
      if (res.status === 204) return null;
      if (res.status !== 200) throw new Error(`take answered ${res.status}: ${await res.text()}`);
      return res.json();
    },
    async takeBatch(size: number): Promise<any[]> {
      const res = await srv.call("GET", `${base}/job-take-batch/${workerId}?gpu=test&batch_size=${size}&job_in_progress=0`, undefined, {
        auth: srv.key,
      });
      if (res.status === 204) return [];
      if (res.status !== 200) throw new Error(`take-batch answered ${res.status}: ${await res.text()}`);
      return (await res.json()) as any[];
    },
    done: (jobId: string, body: unknown, isStream = false) =>
      post(`${base}/job-done/${workerId}/${jobId}?gpu=test&isStream=${isStream}`, body),
    stream: (jobId: string, output: unknown) => post(`${base}/job-stream/${workerId}/${jobId}?gpu=test&isStream=false`, { output }),
    ping: (runningIds: string[] = []) =>
      srv.call(
        "GET",
        `${base}/ping/${workerId}?${runningIds.length ? `job_id=${runningIds.join(",")}&` : ""}runpod_version=1.12.0`,
        undefined,
        { auth: srv.key },
      ),
    async stops(): Promise<string[]> {
      const res = await srv.call("GET", `${base}/job-stop/${workerId}?gpu=test`, undefined, { auth: srv.key });
      if (res.status === 204) return [];
      return ((await res.json()) as { jobsToStop: string[] }).jobsToStop;
    },
  };
}
