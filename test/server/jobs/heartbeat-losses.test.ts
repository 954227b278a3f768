import { expect, test } from "bun:test";
import { ManualClock } from "../../../runtime/clock.ts";
import { MemoryLog } from "../../../runtime/log.ts";
import { Exposition } from "../../helpers/prometheus.ts";
import { protocolWorker } from "../../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../../helpers/test-server.ts";
import { startReceiver } from "../../helpers/webhook-receiver.ts";

/** The dashboard's live event stream, read line by line. */
async function dashboardEvents(srv: TestServer) {
  const abort = new AbortController();
  const res = await fetch(`${srv.url}/dashboard/api/events`, { headers: { authorization: `Bearer ${srv.key}` }, signal: abort.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    /** The first line not read yet that contains `text`. */
    async lineWith(text: string): Promise<string> {
      for (;;) {
        const lines = buffer.split("\n");
        const at = lines.findIndex((l) => l.includes(text));
        if (at >= 0) {
          buffer = lines.slice(at + 1).join("\n");
          return lines[at]!;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error(`the event stream ended before a line with ${text}`);
        buffer += value;
      }
    },
    [Symbol.dispose]: () => abort.abort(),
  };
}

test("a job a worker's heartbeat loses twice ends as any job does: counted in spool_jobs_ended_total, live on the dashboard, its webhook called", async () => {
  const clock = new ManualClock(Date.now());
  const log = new MemoryLog();
  await using receiver = startReceiver([200]);
  await using srv = await startTestServer({ clock, log });
  using events = await dashboardEvents(srv);
  await events.lineWith("event: ready");
  const ended: string[] = [];
  srv.jobEvents.on((e) => void (e.type === "ended" && ended.push(`${e.job.id} ${e.job.status}`)));

  const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {}, webhook: receiver.url });
  const w = protocolWorker(srv, "echo", "w1");
  for (let i = 0; i < 2; i++) {
    expect((await w.take()).id).toBe(id);
    clock.advance(srv.server.config.server.pingGraceMs);
    expect((await w.ping([])).status).toBe(200); // its heartbeat no longer lists the job
  }

  const seen = JSON.parse((await events.lineWith(`"status":"FAILED"`)).slice("data: ".length));
  expect(seen).toMatchObject({ type: "ended", endpointId: "echo", job: { id, status: "FAILED" } });
  expect(ended).toEqual([`${id} FAILED`]);
  const metrics = new Exposition(await (await srv.call("GET", "/metrics")).text());
  expect(metrics.value("spool_jobs_ended_total", { endpoint: "echo", status: "FAILED" })).toBe(1);
  const [call] = await receiver.received(1);
  expect(JSON.parse(call!.body)).toMatchObject({
    id,
    status: "FAILED",
    error: expect.stringContaining("heartbeat no longer listed the job"),
  });
  expect(log.lines.filter((l) => l.includes("worker lost a job")).map((l) => JSON.parse(l).msg)).toEqual([
    "worker lost a job; job re-queued",
    "worker lost a job twice; job failed",
  ]);
});
