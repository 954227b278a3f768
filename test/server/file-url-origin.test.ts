import { expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

/** Submits a job through `origin`, takes it and uploads a file through the server's own URL (127.0.0.1), as a worker the scaler starts does: the file's URL. */
async function uploadedUrl(srv: TestServer, origin: string): Promise<string> {
  const submitted = await fetch(`${origin}/v2/echo/run`, {
    method: "POST",
    headers: { authorization: `Bearer ${srv.key}`, "content-type": "application/json" },
    body: JSON.stringify({ input: { n: 1 } }),
  });
  const { id } = (await submitted.json()) as { id: string };
  const worker = protocolWorker(srv, "echo", `w-${crypto.randomUUID()}`);
  expect((await worker.take())?.id).toBe(id);
  const put = await srv.call("PUT", `/v2/echo/job-files/${worker.id}/${id}/out.txt`, "the file", { headers: { "content-type": "text/plain" } });
  expect(put.status).toBe(200);
  return ((await put.json()) as { url: string }).url;
}

test("a job's file URL is on the origin its client called, not the worker's; publicUrl wins when set", async () => {
  await using srv = await startTestServer({ server: { host: "0.0.0.0" } });
  const port = new URL(srv.url).port;
  const client = `http://127.0.0.2:${port}`; // another address of this machine, as a client elsewhere would use
  const url = await uploadedUrl(srv, client);
  expect(url).toStartWith(`${client}/files/echo/`);
  const fetched = await fetch(url);
  expect([fetched.status, await fetched.text()]).toEqual([200, "the file"]);

  await using behindProxy = await startTestServer({ server: { host: "0.0.0.0", publicUrl: "https://spool.example.com" } });
  const proxied = await uploadedUrl(behindProxy, `http://127.0.0.2:${new URL(behindProxy.url).port}`);
  expect(proxied).toStartWith("https://spool.example.com/files/echo/");
});
