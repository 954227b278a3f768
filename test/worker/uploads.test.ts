import { S3Client } from "bun";
import { beforeAll, describe, expect, test } from "bun:test";
import { ManualClock, systemClock } from "../../runtime/clock.ts";
import { silentLog } from "../../runtime/log.ts";
import type { S3Config } from "../../runtime/protocol/job-request.ts";
import { UPLOAD_URL_SECONDS, uploadToS3 } from "../../runtime/protocol/uploads.ts";
import { WorkerApi } from "../../runtime/worker/worker-api.ts";
import { WorkerLoop } from "../../runtime/worker/worker-loop.ts";
import { urlsFromFlags, workerEndpoints } from "../../runtime/worker/worker-urls.ts";
import uploadHandler, { PNG_BYTES } from "../fixtures/upload-handler.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { s3FromEnv } from "../helpers/s3-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

const SEVEN_DAYS_MS = 7 * 24 * 3600_000;

let s3: S3Config;
// A first run may install Ceph from apt (~30 s) before starting it.
beforeAll(async () => {
  s3 = await s3FromEnv();
}, 120_000);

const bucket = (c: S3Config) =>
  new S3Client({ accessKeyId: c.accessId, secretAccessKey: c.accessSecret, bucket: c.bucketName, endpoint: c.endpointUrl });
const png = () => new Blob([PNG_BYTES], { type: "image/png" });

const flipLast = (hex: string) => `${hex.slice(0, -1)}${hex.endsWith("0") ? "1" : "0"}`;

async function fetchBytes(url: string): Promise<{ status: number; type: string | null; bytes: Uint8Array }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get("content-type"), bytes: new Uint8Array(await res.arrayBuffer()) };
}

/** A real WorkerLoop in this process, wired as worker-main.ts wires it, running the upload fixture. */
function startWorker(srv: TestServer, workerId = "w1") {
  const exits: number[] = [];
  const api = new WorkerApi(workerEndpoints(urlsFromFlags(srv.url, "echo"), workerId), srv.key, systemClock, silentLog);
  const loop = new WorkerLoop({
    handler: uploadHandler,
    api,
    workerId,
    clock: systemClock,
    log: silentLog,
    pingIntervalMs: 100,
    timeoutGraceMs: 1_000,
    drainTimeoutMs: 1_000,
    exit: (code) => exits.push(code),
  });
  const running = loop.run();
  return {
    async [Symbol.asyncDispose]() {
      loop.shutdown();
      expect(await running).toBe(0);
      expect(exits).toEqual([]);
    },
  };
}

describe("uploadToS3 against a real radosgw", () => {
  test("writes the object; its presigned URL serves the exact bytes and type and lasts 7 days", async () => {
    const jobId = crypto.randomUUID();
    const url = new URL(await uploadToS3(s3, jobId, "out.png", png(), "image/png"));
    expect(url.origin).toBe(new URL(s3.endpointUrl).origin);
    expect(url.pathname).toBe(`/${s3.bucketName}/${jobId}/out.png`);
    expect(UPLOAD_URL_SECONDS).toBe(604800);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("604800");
    expect(url.searchParams.get("X-Amz-Algorithm")).toBe("AWS4-HMAC-SHA256");
    expect(await fetchBytes(url.href)).toEqual({ status: 200, type: "image/png", bytes: PNG_BYTES });
  });

  test("objectPath prefixes the key, with its outer slashes trimmed", async () => {
    const jobId = crypto.randomUUID();
    const url = new URL(await uploadToS3({ ...s3, objectPath: "/runs/2026/" }, jobId, "a.png", png(), "image/png"));
    expect(url.pathname).toBe(`/${s3.bucketName}/runs/2026/${jobId}/a.png`);
    expect(await bucket(s3).file(`runs/2026/${jobId}/a.png`).bytes()).toEqual(PNG_BYTES);
    expect(await bucket(s3).exists(`${jobId}/a.png`)).toBe(false);
  });

  test("radosgw checks signatures: a wrong secret fails the upload and stores nothing", async () => {
    const jobId = crypto.randomUUID();
    const failure = await uploadToS3({ ...s3, accessSecret: "not-the-secret" }, jobId, "x.png", png(), "image/png").then(
      () => null,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(Error);
    expect(failure).toMatchObject({ name: "S3Error", code: "SignatureDoesNotMatch" });
    expect(await bucket(s3).exists(`${jobId}/x.png`)).toBe(false);
  });

  test("a presigned URL whose signature or expiry was changed is refused", async () => {
    const url = new URL(await uploadToS3(s3, crypto.randomUUID(), "y.png", png(), "image/png"));
    const badSig = new URL(url);
    badSig.searchParams.set("X-Amz-Signature", "0".repeat(64));
    const shorter = new URL(url);
    shorter.searchParams.set("X-Amz-Expires", "60");
    for (const u of [badSig, shorter]) {
      const res = await fetch(u);
      expect(res.status).toBe(403);
      expect(await res.text()).toContain("<Code>SignatureDoesNotMatch</Code>");
    }
  });
});

describe("ctx.upload through a real queue server and WorkerLoop", () => {
  test("a job with s3Config returns a presigned radosgw URL that serves the bytes", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 } });
    await using _worker = startWorker(srv);
    const [code, body] = await srv.json("POST", "/v2/echo/runsync", { input: { name: "photo.png" }, s3Config: s3 });
    expect(code).toBe(200);
    expect(body).toEqual({
      id: expect.stringMatching(/^sync-/),
      status: "COMPLETED",
      output: { url: expect.any(String) },
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "w1",
    });
    const url = new URL(body.output.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${s3.endpointUrl}/${s3.bucketName}/${body.id}/photo.png`);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("604800");
    expect(await fetchBytes(url.href)).toEqual({ status: 200, type: "image/png", bytes: PNG_BYTES });
  });

  test("with a bucket configured on the server, a job without s3Config gets a presigned URL in that bucket", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000, files: { ...s3, objectPath: "server-files" } } });
    await using _worker = startWorker(srv);
    const [, body] = await srv.json("POST", "/v2/echo/runsync", { input: { name: "photo.png" } });
    expect(body.status).toBe("COMPLETED");
    const url = new URL(body.output.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${s3.endpointUrl}/${s3.bucketName}/server-files/echo/${body.id}/photo.png`);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("604800");
    expect(await fetchBytes(url.href)).toEqual({ status: 200, type: "image/png", bytes: PNG_BYTES });
  });

  test("a job without s3Config returns a signed /files/ URL of the server; a changed URL answers 403", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 } });
    await using _worker = startWorker(srv);
    const before = Date.now();
    const [, pngJob] = await srv.json("POST", "/v2/echo/runsync", { input: { name: "photo.png" } });
    const [, textJob] = await srv.json("POST", "/v2/echo/runsync", { input: { name: "note.txt", text: "héllo wörld ✓" } });
    const after = Date.now();
    expect([pngJob.status, textJob.status]).toEqual(["COMPLETED", "COMPLETED"]);

    const url = new URL(pngJob.output.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${srv.url}/files/echo/${pngJob.id}/photo.png`);
    expect([...url.searchParams.keys()]).toEqual(["expires", "sig"]);
    expect(url.searchParams.get("sig")).toMatch(/^[0-9a-f]{64}$/);
    const expires = Number(url.searchParams.get("expires"));
    expect(expires).toBeGreaterThanOrEqual(before + SEVEN_DAYS_MS);
    expect(expires).toBeLessThanOrEqual(after + SEVEN_DAYS_MS);
    expect(await fetchBytes(url.href)).toEqual({ status: 200, type: "image/png", bytes: PNG_BYTES });

    const text = await fetch(textJob.output.url);
    expect([text.status, text.headers.get("content-type"), await text.text()]).toEqual([200, "text/plain", "héllo wörld ✓"]);

    const changed = (edit: (u: URL) => void) => {
      const u = new URL(url);
      edit(u);
      return u.href;
    };
    const refused = [
      changed((u) => u.searchParams.set("sig", flipLast(url.searchParams.get("sig")!))),
      changed((u) => u.searchParams.set("expires", String(expires + 1))),
      changed((u) => u.searchParams.set("expires", String(before - 1))),
      changed((u) => u.searchParams.delete("sig")),
      // A valid signature does not carry over to another job's file.
      changed((u) => (u.pathname = `/files/echo/${textJob.id}/photo.png`)),
    ];
    for (const href of refused) {
      const res = await fetch(href);
      expect([res.status, await res.json()]).toEqual([403, { error: "this file URL is invalid or has expired" }]);
    }
  });

  test("a file URL works until fileUrlTtlMs has passed on the server's clock, then answers 403", async () => {
    const clock = new ManualClock();
    await using srv = await startTestServer({ clock, server: { fileUrlTtlMs: 60_000 } });
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    expect((await protocolWorker(srv, "echo", "w1").take()).id).toBe(id);
    // The worker's own upload call, without a loop: the clock is the server's to drive.
    const api = new WorkerApi(workerEndpoints(urlsFromFlags(srv.url, "echo"), "w1"), srv.key, clock, silentLog);
    const url = await api.upload(id, "late.txt", new Blob(["soon gone"]), "text/plain");
    expect(new URL(url).searchParams.get("expires")).toBe(String(clock.now() + 60_000));

    clock.advance(59_999);
    expect(await (await fetch(url)).text()).toBe("soon gone");
    clock.advance(1);
    const res = await fetch(url);
    expect([res.status, await res.json()]).toEqual([403, { error: "this file URL is invalid or has expired" }]);
  });

  test("a file named like another file's type record (x and x.type) keeps both files and types apart", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await protocolWorker(srv, "echo", "w1").take();
    const api = new WorkerApi(workerEndpoints(urlsFromFlags(srv.url, "echo"), "w1"), srv.key, systemClock, silentLog);
    const page = await api.upload(id, "page", new Blob(["<script>alert(1)</script>"]), "text/plain");
    const sidecar = await api.upload(id, "page.type", new Blob(["text/html"]), "application/x-note");
    const read = async (url: string) => {
      const res = await fetch(url);
      return [res.status, res.headers.get("content-type"), await res.text()];
    };
    expect(await read(page)).toEqual([200, "text/plain", "<script>alert(1)</script>"]);
    expect(await read(sidecar)).toEqual([200, "application/x-note", "text/html"]);
  });

  test("the server refuses a file for a job that is not running on the uploading worker", async () => {
    await using srv = await startTestServer();
    const [, { id }] = await srv.json("POST", "/v2/echo/run", { input: {} });
    await protocolWorker(srv, "echo", "w1").take();
    const other = new WorkerApi(workerEndpoints(urlsFromFlags(srv.url, "echo"), "w2"), srv.key, systemClock, silentLog);
    await expect(other.upload(id, "x.txt", new Blob(["x"]), "text/plain")).rejects.toThrow(
      "upload of x.txt failed: HTTP 404 worker w2 not found", // w2 has taken no job: it cannot hold one
    );
    // A worker of the endpoint that does not run the job.
    await protocolWorker(srv, "echo", "w3").take();
    const third = new WorkerApi(workerEndpoints(urlsFromFlags(srv.url, "echo"), "w3"), srv.key, systemClock, silentLog);
    await expect(third.upload(id, "x.txt", new Blob(["x"]), "text/plain")).rejects.toThrow(
      `upload of x.txt failed: HTTP 404 job ${id} is not running on worker w3`,
    );
  });
});
