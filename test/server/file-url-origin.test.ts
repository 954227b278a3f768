import { expect, test } from "bun:test";
import OpenAI from "openai";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

// A job's file URLs are built on the origin its client called when it submitted the job, while
// the worker uploads through the server's own loopback URL (as workers the scaler starts do).

/** Uploads a file for `jobId` as `worker`, through the server's own URL (127.0.0.1): the file's URL. */
async function upload(srv: TestServer, endpoint: string, workerId: string, jobId: string): Promise<string> {
  const put = await srv.call("PUT", `/v2/${endpoint}/job-files/${workerId}/${jobId}/out.txt`, "the file", {
    headers: { "content-type": "text/plain" },
  });
  expect(put.status).toBe(200);
  return ((await put.json()) as { url: string }).url;
}

/** Submits a job through `origin`, takes it and uploads a file for it: the file's URL. */
async function uploadedUrl(srv: TestServer, origin: string): Promise<string> {
  const submitted = await fetch(`${origin}/v2/echo/run`, {
    method: "POST",
    headers: { authorization: `Bearer ${srv.key}`, "content-type": "application/json" },
    body: JSON.stringify({ input: { n: 1 } }),
  });
  const { id } = (await submitted.json()) as { id: string };
  const worker = protocolWorker(srv, "echo", `w-${crypto.randomUUID()}`);
  expect((await worker.take())?.id).toBe(id);
  return upload(srv, "echo", worker.id, id);
}

/** The same path and query on the server's own address: what a client at `url`'s origin reaches. */
const onServer = (srv: TestServer, url: string) => `${srv.url}${url.slice(new URL(url).origin.length)}`;

test("a job's file URL is on the origin its client called, not the worker's; publicUrl wins when set", async () => {
  await using srv = await startTestServer({ server: { host: "0.0.0.0" } });
  const port = new URL(srv.url).port;
  const client = `http://127.0.0.2:${port}`; // another address of this machine, as a client elsewhere would use
  const url = await uploadedUrl(srv, client);
  expect(url).toStartWith(`${client}/files/echo/`);
  const fetched = await fetch(url);
  expect([fetched.status, await fetched.text()]).toEqual([200, "the file"]);

  // Submitted through the server's own origin (the one its workers call): nothing recorded, the URL is on it.
  const own = await uploadedUrl(srv, srv.url);
  expect(own).toStartWith(`${srv.url}/files/echo/`);
  const ownJob = (await srv.store.recent("echo", srv.clock.now(), 1)).jobs[0]!;
  expect(ownJob.origin).toBeUndefined();

  await using behindProxy = await startTestServer({ server: { host: "0.0.0.0", publicUrl: "https://spool.example.com" } });
  const proxied = await uploadedUrl(behindProxy, `http://127.0.0.2:${new URL(behindProxy.url).port}`);
  expect(proxied).toStartWith("https://spool.example.com/files/echo/");
});

test("a request without a valid Host header is a 400 naming it, and queues nothing", async () => {
  await using srv = await startTestServer();
  for (const host of ["", "not a host", "evil.example/x"]) {
    for (const [method, path] of [
      ["POST", "/v2/echo/run"],
      ["GET", "/v2/echo/health"],
      ["GET", "/v2/echo/job-take/w1"],
      ["GET", "/nowhere"],
    ]) {
      const res = await fetch(`${srv.url}${path}`, {
        method,
        headers: { host, authorization: `Bearer ${srv.key}` },
        body: method === "POST" ? JSON.stringify({ input: {} }) : undefined,
      });
      expect({ host, path, status: res.status, body: await res.json() }).toEqual({
        host,
        path,
        status: 400,
        body: { error: "the request has no valid Host header" },
      });
    }
  }
  expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
});

test("/runsync records the Host its client sent: the file URL names it, and the file is there", async () => {
  // A worker's take waits for the job, so the runsync below is answered by this worker. The
  // name is one the server answers for (a name not listed is a 400: allowed-hosts.test.ts).
  await using srv = await startTestServer({ server: { takeWaitMs: 60_000, allowedHosts: ["spool.lan:8443"] } });
  const worker = protocolWorker(srv, "echo", "w-sync");
  const taking = worker.take();
  const answer = fetch(`${srv.url}/v2/echo/runsync?wait=60000`, {
    method: "POST",
    headers: { authorization: `Bearer ${srv.key}`, "content-type": "application/json", host: "spool.lan:8443" },
    body: JSON.stringify({ input: { n: 1 } }),
  });
  const job = await taking;
  const url = await upload(srv, "echo", worker.id, job.id);
  expect((await worker.done(job.id, { output: { url } })).status).toBe(200);
  const done = (await (await answer).json()) as { status: string; output: { url: string } };
  expect(done.status).toBe("COMPLETED");
  expect(done.output.url).toStartWith(`http://spool.lan:8443/files/echo/${job.id}/out.txt?`);
  const fetched = await fetch(onServer(srv, done.output.url));
  expect([fetched.status, await fetched.text()]).toEqual([200, "the file"]);
});

test("an OpenAI-compatible request records its client's origin too", async () => {
  await using srv = await startTestServer({
    server: { host: "0.0.0.0", takeWaitMs: 60_000 },
    endpoints: { vllm: { rateLimits: { requests: { requests: 1_000_000 } } } },
  });
  const client = `http://127.0.0.2:${new URL(srv.url).port}`;
  const worker = protocolWorker(srv, "vllm", "w-openai");
  const taking = worker.take();
  const openai = new OpenAI({ apiKey: srv.key, baseURL: `${client}/v2/vllm/openai/v1`, maxRetries: 0 });
  const answer = openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "a file" }] });
  const job = await taking;
  const url = await upload(srv, "vllm", worker.id, job.id);
  const completion = {
    id: "c1",
    object: "chat.completion",
    created: 1,
    model: "m",
    choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: url } }],
  };
  expect((await worker.done(job.id, { output: completion })).status).toBe(200);
  const content = (await answer).choices[0]!.message.content!;
  expect(content).toStartWith(`${client}/files/vllm/${job.id}/out.txt?`);
  const fetched = await fetch(content);
  expect([fetched.status, await fetched.text()]).toEqual([200, "the file"]);
});
