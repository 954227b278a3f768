import { expect, test } from "bun:test";
import { startTestServer } from "../helpers/test-server.ts";

const s3Config = (endpointUrl: string) => ({ accessId: "id", accessSecret: "secret", bucketName: "bucket", endpointUrl });

test("an endpoint with s3Hosts refuses a job whose s3Config names another host (400, nothing queued) and takes one that names an allowed host", async () => {
  await using srv = await startTestServer({ endpoints: { echo: { s3Hosts: ["s3.example.com", "minio.internal:9000"] } } });
  expect(await srv.json("POST", "/v2/echo/run", { input: {}, s3Config: s3Config("http://169.254.169.254/") })).toEqual([
    400,
    { error: "invalid job request: s3Config.endpointUrl: host 169.254.169.254 is not one this endpoint allows (s3Hosts)" },
  ]);
  expect(await srv.json("POST", "/v2/echo/run", { input: {}, s3Config: s3Config("http://minio.internal:9001/") })).toEqual([
    400,
    { error: "invalid job request: s3Config.endpointUrl: host minio.internal:9001 is not one this endpoint allows (s3Hosts)" },
  ]);
  expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(0);
  for (const url of ["https://S3.example.com/", "http://minio.internal:9000/"]) {
    const [status, body] = await srv.json("POST", "/v2/echo/run", { input: {}, s3Config: s3Config(url) });
    expect({ url, status, queued: body.status }).toEqual({ url, status: 200, queued: "IN_QUEUE" });
  }
});
