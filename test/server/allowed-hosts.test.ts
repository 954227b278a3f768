import { describe, expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

/** A request to the server with `host` as its Host header. */
const asHost = (srv: TestServer, host: string, method: string, path: string, body?: unknown) =>
  fetch(`${srv.url}${path}`, {
    method,
    headers: { host, authorization: `Bearer ${srv.key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const refusal = (host: string) => ({ error: `Host "${host}" is not one this server answers for: add it to server.allowedHosts` });

describe("the hosts a server answers for (server.allowedHosts)", () => {
  test("a forged Host is a 400 naming server.allowedHosts, and makes no job", async () => {
    await using srv = await startTestServer();
    const res = await asHost(srv, "evil.example", "POST", "/v2/echo/run", { input: { n: 1 } });
    expect([res.status, await res.json()]).toEqual([400, refusal("evil.example")]);
    const withPort = await asHost(srv, "evil.example:8080", "POST", "/v2/echo/runsync?wait=1000", { input: { n: 1 } });
    expect([withPort.status, await withPort.json()]).toEqual([400, refusal("evil.example:8080")]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs).toEqual({ completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 });
  });

  test("every route refuses it: the six of a job's path and the others", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: { n: 1 } });
    const routes: [string, string, unknown?][] = [
      ["POST", "/v2/echo/run", { input: {} }],
      ["POST", "/v2/echo/runsync", { input: {} }],
      ["GET", `/v2/echo/status/${id}`],
      ["GET", "/v2/echo/job-take/w1"],
      ["GET", "/v2/echo/job-take-batch/w1?batch_size=2"],
      ["POST", `/v2/echo/job-done/w1/${id}`, { output: 1 }],
      ["GET", "/v2/echo/health"],
      ["POST", `/v2/echo/cancel/${id}`],
      ["GET", "/openapi.json"],
      ["GET", "/nowhere"],
    ];
    for (const [method, path, body] of routes) {
      const res = await asHost(srv, "rebound.example", method, path, body);
      expect({ path, status: res.status, body: await res.json() }).toEqual({ path, status: 400, body: refusal("rebound.example") });
    }
    // Nothing changed: the job is still queued, untaken and uncancelled.
    expect((await srv.json("GET", `/v2/echo/status/${id}`))[1]).toMatchObject({ id, status: "IN_QUEUE" });
  });

  test("by default: the listen address and localhost on any port; an extra name once listed", async () => {
    await using srv = await startTestServer({ server: { allowedHosts: ["spool.lan", "other.lan:8443"] } });
    const answered = async (host: string) => (await asHost(srv, host, "GET", "/v2/echo/health")).status;
    expect({
      listen: await answered(new URL(srv.url).host),
      listenOtherPort: await answered("127.0.0.1:9000"),
      localhost: await answered("localhost:9000"),
      name: await answered("spool.lan"),
      nameAnyPort: await answered("SPOOL.lan:1234"),
      namePort: await answered("other.lan:8443"),
      nameOtherPort: await answered("other.lan:8444"),
      suffix: await answered("spool.lan.evil.example"),
      otherAddress: await answered("127.0.0.2"),
    }).toEqual({
      listen: 200,
      listenOtherPort: 200,
      localhost: 200,
      name: 200,
      nameAnyPort: 200,
      namePort: 200,
      nameOtherPort: 400,
      suffix: 400,
      otherAddress: 400,
    });
    const [status, job] = [
      (await asHost(srv, "spool.lan", "POST", "/v2/echo/run", { input: { n: 1 } })).status,
      (await srv.store.recent("echo", srv.clock.now(), 1)).jobs[0],
    ];
    expect([status, job?.origin]).toEqual([200, "http://spool.lan"]);
  });

  test("listening on 0.0.0.0: any IP address of the machine, names only when listed; * answers any host", async () => {
    await using srv = await startTestServer({ server: { host: "0.0.0.0" } });
    const port = new URL(srv.url).port;
    const answered = async (host: string) => (await asHost(srv, host, "GET", "/v2/echo/health")).status;
    expect([
      await answered(`127.0.0.2:${port}`),
      await answered("[::1]:9000"),
      await answered("10.1.2.3"),
      await answered("localhost"),
      await answered("spool.lan"),
    ]).toEqual([200, 200, 200, 200, 400]);
    await using open = await startTestServer({ server: { allowedHosts: ["*"] } });
    expect((await asHost(open, "anything.example", "GET", "/v2/echo/health")).status).toBe(200);
  });

  test("publicUrl's host is answered", async () => {
    await using srv = await startTestServer({ server: { publicUrl: "https://spool.example.com" } });
    expect((await asHost(srv, "spool.example.com", "GET", "/v2/echo/health")).status).toBe(200);
  });
});

describe("X-Forwarded-Host and X-Forwarded-Proto (server.trustedProxies)", () => {
  const forwarded = { "x-forwarded-host": "public.example", "x-forwarded-proto": "https" };

  /** Submits through 127.0.0.1 with `headers`, takes the job and uploads a file: the file's URL. */
  async function fileUrl(srv: TestServer, headers: Record<string, string>): Promise<string> {
    const res = await fetch(`${srv.url}/v2/echo/run`, {
      method: "POST",
      headers: { authorization: `Bearer ${srv.key}`, ...headers },
      body: JSON.stringify({ input: {} }),
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    const worker = protocolWorker(srv, "echo", `w-${crypto.randomUUID()}`);
    expect((await worker.take())?.id).toBe(id);
    const put = await srv.call("PUT", `/v2/echo/job-files/${worker.id}/${id}/out.txt`, "the file");
    expect(put.status).toBe(200);
    return ((await put.json()) as { url: string }).url;
  }

  test("ignored from a peer that is not a trusted proxy", async () => {
    await using srv = await startTestServer({ server: { allowedHosts: ["public.example"], trustedProxies: ["10.0.0.0/8"] } });
    expect(await fileUrl(srv, forwarded)).toStartWith(`${srv.url}/files/echo/`);
    // Not even checked: a forged one from such a peer changes nothing.
    expect(await fileUrl(srv, { "x-forwarded-host": "evil.example" })).toStartWith(`${srv.url}/files/echo/`);
  });

  test("from a trusted proxy: file URLs are https on the forwarded host, which must be allowed", async () => {
    await using srv = await startTestServer({ server: { allowedHosts: ["public.example"], trustedProxies: ["127.0.0.1"] } });
    expect(await fileUrl(srv, forwarded)).toStartWith("https://public.example/files/echo/");
    expect(await fileUrl(srv, { "x-forwarded-proto": "https" })).toStartWith(`https://${new URL(srv.url).host}/files/echo/`);
    const evil = await fetch(`${srv.url}/v2/echo/run`, {
      method: "POST",
      headers: { authorization: `Bearer ${srv.key}`, "x-forwarded-host": "evil.example" },
      body: JSON.stringify({ input: {} }),
    });
    expect([evil.status, await evil.json()]).toEqual([
      400,
      { error: 'Host "evil.example" (X-Forwarded-Host) is not one this server answers for: add it to server.allowedHosts' },
    ]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
  });
});
