/**
 * The worker's URL templates, in RunPod's shape: `$ID` is the worker id in `take`, the job id in
 * `done`/`stream`; `$RUNPOD_POD_ID` is the worker id. Every template already holds a `?`, since
 * parameters are appended with a bare `&` (as runpod-python does).
 */
export interface WorkerUrls {
  take: string;
  done: string;
  stream: string;
  ping: string;
}

/** Templates for `spool worker --url URL --endpoint ID`. */
export function urlsFromFlags(url: string, endpoint: string): WorkerUrls {
  const base = `${url.replace(/\/+$/, "")}/v2/${encodeURIComponent(endpoint)}`;
  return {
    take: `${base}/job-take/$ID?gpu=spool`,
    done: `${base}/job-done/$RUNPOD_POD_ID/$ID?gpu=spool`,
    stream: `${base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=spool`,
    ping: `${base}/ping/$RUNPOD_POD_ID?gpu=spool`,
  };
}

/** Templates from RunPod's environment contract, or null when RUNPOD_WEBHOOK_GET_JOB is unset. */
export function urlsFromEnv(env: Record<string, string | undefined>): WorkerUrls | null {
  const take = env.RUNPOD_WEBHOOK_GET_JOB;
  if (!take) return null;
  const done = env.RUNPOD_WEBHOOK_POST_OUTPUT;
  if (!done) throw new Error("RUNPOD_WEBHOOK_GET_JOB is set but RUNPOD_WEBHOOK_POST_OUTPUT is not");
  const withQuery = (u: string) => (u.includes("?") ? u : `${u}?`);
  return {
    take: withQuery(take),
    done: withQuery(done),
    stream: withQuery(env.RUNPOD_WEBHOOK_POST_STREAM ?? done.replace("/job-done/", "/job-stream/")),
    ping: withQuery(env.RUNPOD_WEBHOOK_PING ?? take.replace(/\/job-take\/.*$/, "/ping/$RUNPOD_POD_ID")),
  };
}

const fill = (template: string, workerId: string, id: string) =>
  template.replaceAll("$RUNPOD_POD_ID", encodeURIComponent(workerId)).replaceAll("$ID", encodeURIComponent(id));

/** Concrete URLs for one worker. */
export function workerEndpoints(urls: WorkerUrls, workerId: string) {
  const take = fill(urls.take, workerId, workerId);
  const [takePath, takeQuery = ""] = take.split("?");
  return {
    take: (inProgress: boolean) => `${take}&job_in_progress=${inProgress ? 1 : 0}`,
    takeBatch: (size: number, inProgress: boolean) =>
      `${takePath!.replace("/job-take/", "/job-take-batch/")}?${takeQuery}&batch_size=${size}&job_in_progress=${inProgress ? 1 : 0}`,
    done: (jobId: string, isStream: boolean) => `${fill(urls.done, workerId, jobId)}&isStream=${isStream}`,
    stream: (jobId: string) => `${fill(urls.stream, workerId, jobId)}&isStream=false`,
    // Spool's own route beside job-done; none where the done URL is not of RunPod's shape.
    log: (jobId: string): string | null =>
      urls.done.includes("/job-done/") ? fill(urls.done.replace("/job-done/", "/job-log/"), workerId, jobId) : null,
    ping: (runningIds: string[]) =>
      `${fill(urls.ping, workerId, workerId)}${runningIds.length ? `&job_id=${runningIds.map(encodeURIComponent).join(",")}` : ""}&runpod_version=spool`,
    stop: () => `${takePath!.replace(/\/job-take\/[^/]*$/, `/job-stop/${encodeURIComponent(workerId)}`)}?${takeQuery}`,
    file: (jobId: string, name: string) =>
      `${takePath!.replace(/\/job-take\/[^/]*$/, `/job-files/${encodeURIComponent(workerId)}/${encodeURIComponent(jobId)}/${encodeURIComponent(name)}`)}`,
  };
}
export type WorkerEndpoints = ReturnType<typeof workerEndpoints>;
