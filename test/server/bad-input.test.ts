import { describe, expect, test } from "bun:test";
import { seededRandom } from "../helpers/seeded-random.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";

// Every bad request is answered 4xx with a body of exactly {"error": "<non-empty string>"} and
// leaves the store as it was. The test server holds no long-poll open (all waits are 0), and a
// runsync below always carries ?wait=1000 so that a request wrongly accepted cannot park for 90 s.

const NO_JOBS = { completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 };
const NO_WORKERS = { idle: 0, running: 0, initializing: 0, unhealthy: 0 };
const VALID_S3 = { accessId: "AK", accessSecret: "secret", bucketName: "bucket", endpointUrl: "http://127.0.0.1:9/" };

interface Answer {
  status: number;
  contentType: string | null;
  body: unknown;
}

/** Sends a request with the test key; a string body goes as is, anything else as JSON. */
async function send(srv: TestServer, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await srv.call(method, path, body);
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // left as text: the assertion below shows it
  }
  return { status: res.status, contentType: res.headers.get("content-type"), body: parsed };
}

/** A request body as a failure message shows it: long ones cut short. */
const shown = (body: unknown) => (typeof body === "string" && body.length > 200 ? `${body.slice(0, 200)}... (${body.length} chars)` : body);

/**
 * Expects `status` ("4xx": any of 400..499) with a body of exactly {error: non-empty string};
 * returns the message.
 */
async function expectError(
  srv: TestServer,
  method: string,
  path: string,
  body: unknown,
  status: number | "4xx",
  mentions?: string | string[],
): Promise<string> {
  const got = await send(srv, method, path, body);
  const seen = status === "4xx" && got.status >= 400 && got.status < 500 ? "4xx" : got.status;
  // method, path and body ride along so that a failure says which request it was.
  expect({ method, path, sent: shown(body), ...got, status: seen }).toEqual({
    method,
    path,
    sent: shown(body),
    status,
    contentType: expect.stringContaining("application/json"),
    body: { error: expect.stringMatching(/\S/) },
  } as never);
  const message = (got.body as { error: string }).error;
  for (const m of typeof mentions === "string" ? [mentions] : (mentions ?? [])) expect(message).toContain(m);
  return message;
}

/** Expects a valid /run to be accepted; returns its id. */
async function accept(srv: TestServer, body: unknown): Promise<string> {
  const got = await send(srv, "POST", "/v2/echo/run", body);
  expect({ sent: shown(body), ...got }).toEqual({
    sent: shown(body),
    status: 200,
    contentType: expect.stringContaining("application/json"),
    body: { id: expect.any(String), status: "IN_QUEUE" },
  } as never);
  return (got.body as { id: string }).id;
}

/** The store holds exactly the jobs `accepted` (all still queued) and no worker has been seen. */
async function expectOnlyJobs(srv: TestServer, accepted: string[]): Promise<void> {
  expect(await srv.json("GET", "/v2/echo/health")).toEqual([200, { jobs: { ...NO_JOBS, inQueue: accepted.length }, workers: NO_WORKERS }]);
  const [code, page] = await srv.json("GET", "/v2/echo/requests?limit=100");
  expect(code).toBe(200);
  expect(page.requests.map((r: { id: string }) => r.id)).toEqual([...accepted].reverse());
}

describe.each(["/run", "/runsync?wait=1000"])("job request body of POST %s", (route) => {
  const path = `/v2/echo${route}`;

  test("malformed JSON is 400 'not valid JSON'", async () => {
    await using srv = await startTestServer();
    for (const body of [
      '{"input":',
      "{input: {}}",
      "{'input': {}}",
      '{"input": {}}}',
      '{"input": {},}',
      '{"input": {"a": NaN}}',
      '{"input": {"a": undefined}}',
      "not json",
      "input=%7B%7D",
      '{"input": {"a": "\\x01"}}',
      "\u0000",
    ]) {
      await expectError(srv, "POST", path, body, 400, "not valid JSON");
    }
    await expectOnlyJobs(srv, []);
  });

  test("an empty or blank body is 400 'empty'", async () => {
    await using srv = await startTestServer();
    for (const body of [undefined, "", "   ", "\n\t\r\n"]) await expectError(srv, "POST", path, body, 400, "empty");
    await expectOnlyJobs(srv, []);
  });

  test("a body that is JSON but not an object is 400", async () => {
    await using srv = await startTestServer();
    for (const body of ["[]", '[{"input": {}}]', '"input"', '""', "42", "-1.5", "null", "true", "false"]) {
      await expectError(srv, "POST", path, body, 400, "invalid job request");
    }
    await expectOnlyJobs(srv, []);
  });

  test("a missing input is 400 naming input", async () => {
    await using srv = await startTestServer();
    for (const body of [{}, { inputs: {} }, { Input: {} }, { webhook: "http://127.0.0.1:9/hook" }, { policy: { ttl: 10_000 } }]) {
      await expectError(srv, "POST", path, body, 400, ["input", "is required"]);
    }
    await expectOnlyJobs(srv, []);
  });

  test("an input that is not an object is 400 naming input", async () => {
    await using srv = await startTestServer();
    for (const input of [[], [1, 2], ["a"], "text", "", 0, 42, null, true, false]) {
      await expectError(srv, "POST", path, { input }, 400, ["input", "must be a JSON object"]);
    }
    await expectOnlyJobs(srv, []);
  });
});

describe("execution policy", () => {
  test("executionTimeout must be an integer greater than 5000: 5000 is refused, 5001 accepted", async () => {
    await using srv = await startTestServer();
    for (const executionTimeout of [5000, 4999, 0, -1, 5000.5, 6000.5, "6000", true, [], {}, 7 * 24 * 3600_000 + 1]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, policy: { executionTimeout } }, 400, "policy.executionTimeout");
    }
    const id = await accept(srv, { input: {}, policy: { executionTimeout: 5001 } });
    expect((await srv.store.get("echo", id, srv.clock.now()))!.policy).toEqual({
      executionTimeout: 5001,
      lowPriority: false,
      ttl: 86_400_000,
    });
    await expectOnlyJobs(srv, [id]);
  });

  test("ttl must be an integer from 10000 to one week: 9999 and 604800001 refused, both bounds accepted", async () => {
    await using srv = await startTestServer();
    for (const ttl of [9999, 604_800_001, 0, -10_000, 10_000.5, "10000", false, [10_000], { ms: 10_000 }]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, policy: { ttl } }, 400, "policy.ttl");
    }
    const low = await accept(srv, { input: {}, policy: { ttl: 10_000 } });
    const high = await accept(srv, { input: {}, policy: { ttl: 604_800_000 } });
    expect((await srv.store.get("echo", low, srv.clock.now()))!.policy.ttl).toBe(10_000);
    expect((await srv.store.get("echo", high, srv.clock.now()))!.policy.ttl).toBe(604_800_000);
    await expectOnlyJobs(srv, [low, high]);
  });

  test("lowPriority must be a boolean", async () => {
    await using srv = await startTestServer();
    for (const lowPriority of ["yes", "true", 1, 0, [], {}]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, policy: { lowPriority } }, 400, "policy.lowPriority");
    }
    await expectOnlyJobs(srv, []);
  });

  test("an unknown policy key is 400 naming it, even next to valid ones", async () => {
    await using srv = await startTestServer();
    for (const policy of [{ priority: 1 }, { ttl: 10_000, timeout: 6000 }, { executionTimeout: 6000, TTL: 10_000 }]) {
      const extra = Object.keys(policy).find((k) => !["ttl", "executionTimeout", "lowPriority"].includes(k))!;
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, policy }, 400, ["policy", extra]);
    }
    await expectOnlyJobs(srv, []);
  });

  test("a policy that is not an object is 400 naming policy", async () => {
    await using srv = await startTestServer();
    for (const policy of ["fast", 1, true, [], [{ ttl: 10_000 }]]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, policy }, 400, "policy");
    }
    await expectOnlyJobs(srv, []);
  });

  test("every bad field is named in one message", async () => {
    await using srv = await startTestServer();
    const message = await expectError(
      srv,
      "POST",
      "/v2/echo/run",
      { input: [], webhook: "ftp://x", policy: { ttl: 1, executionTimeout: 1, lowPriority: "no" } },
      400,
    );
    for (const field of ["input", "webhook", "policy.ttl", "policy.executionTimeout", "policy.lowPriority"])
      expect(message).toContain(field);
    await expectOnlyJobs(srv, []);
  });
});

describe("webhook and s3Config", () => {
  test("a webhook that is not an http(s) URL is 400 naming webhook", async () => {
    await using srv = await startTestServer();
    for (const webhook of [
      "ftp://example.com/hook",
      "file:///etc/passwd",
      "javascript:alert(1)",
      "mailto:ops@example.com",
      "example.com/hook",
      "//example.com/hook",
      "not a url",
      "",
      42,
      true,
      ["http://example.com/hook"],
      { url: "http://example.com/hook" },
    ]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, webhook }, 400, "webhook");
    }
    await expectOnlyJobs(srv, []);
  });

  test("an s3Config with a missing or non-string field is 400 naming the field", async () => {
    await using srv = await startTestServer();
    for (const field of ["accessId", "accessSecret", "bucketName", "endpointUrl"] as const) {
      const { [field]: _, ...missing } = VALID_S3;
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, s3Config: missing }, 400, `s3Config.${field}`);
      for (const value of [1, true, null, [], {}]) {
        await expectError(srv, "POST", "/v2/echo/run", { input: {}, s3Config: { ...VALID_S3, [field]: value } }, 400, `s3Config.${field}`);
      }
    }
    await expectError(
      srv,
      "POST",
      "/v2/echo/run",
      { input: {}, s3Config: { ...VALID_S3, endpointUrl: "not a url" } },
      400,
      "s3Config.endpointUrl",
    );
    for (const s3Config of ["AK:secret@bucket", 1, [], [VALID_S3]]) {
      await expectError(srv, "POST", "/v2/echo/run", { input: {}, s3Config }, 400, "s3Config");
    }
    await expectOnlyJobs(srv, []);
  });
});

describe("query parameters", () => {
  test("runsync wait outside 1000..300000 or not an integer is 400 and queues nothing, even with a valid body", async () => {
    await using srv = await startTestServer();
    for (const wait of ["999", "0", "-1", "300001", "abc", "1.5", "1e3", "0x400", "1000ms", "%20"]) {
      await expectError(srv, "POST", `/v2/echo/runsync?wait=${wait}`, { input: { ok: true } }, 400, "wait");
    }
    await expectOnlyJobs(srv, []);
  });

  test("status ttl outside 10000..one week is 400 and leaves the job's expiry alone", async () => {
    await using srv = await startTestServer();
    const id = await accept(srv, { input: {} });
    const before = await srv.store.get("echo", id, srv.clock.now());
    for (const ttl of ["5", "9999", "604800001", "abc", "-10000", "10000.5"]) {
      await expectError(srv, "GET", `/v2/echo/status/${id}?ttl=${ttl}`, undefined, 400, "ttl");
    }
    // ttl is checked before the job is looked up.
    await expectError(srv, "GET", "/v2/echo/status/no-such-job?ttl=5", undefined, 400, "ttl");
    expect(await srv.store.get("echo", id, srv.clock.now())).toEqual(before);
    await expectOnlyJobs(srv, [id]);
  });

  test("requests limit outside 1..100 or a cursor that is not one is 400", async () => {
    await using srv = await startTestServer();
    for (const limit of ["0", "101", "-1", "abc", "2.5"]) {
      await expectError(srv, "GET", `/v2/echo/requests?limit=${limit}`, undefined, 400, "limit");
    }
    for (const cursor of ["abc", "-1", "1.5", "1e3", "%2F"]) {
      await expectError(srv, "GET", `/v2/echo/requests?cursor=${cursor}`, undefined, 400, "cursor");
    }
    await expectOnlyJobs(srv, []);
  });

  test("job-take-batch batch_size outside 1..64 is 400 and registers no worker", async () => {
    await using srv = await startTestServer();
    const id = await accept(srv, { input: {} });
    for (const size of ["0", "65", "abc", "-1"]) {
      await expectError(srv, "GET", `/v2/echo/job-take-batch/w1?batch_size=${size}`, undefined, 400, "batch_size");
    }
    await expectOnlyJobs(srv, [id]);
  });
});

describe("unknown jobs", () => {
  test("status, status-sync, stream, cancel and retry of an unknown id are 404", async () => {
    await using srv = await startTestServer();
    const kept = await accept(srv, { input: {} });
    const ids = [
      crypto.randomUUID(),
      `sync-${crypto.randomUUID()}`,
      "nope",
      encodeURIComponent("../../etc/passwd"),
      encodeURIComponent("a b?c#d&e=f"),
      encodeURIComponent("💩\u0000'\";--"),
      "%25",
      "%00",
      "%E0%A4%A",
      "x".repeat(500),
      `${kept}x`,
      kept.toUpperCase(),
    ];
    for (const id of ids) {
      await expectError(srv, "GET", `/v2/echo/status/${id}`, undefined, 404, "not found");
      await expectError(srv, "GET", `/v2/echo/status/${id}?ttl=60000`, undefined, 404, "not found");
      await expectError(srv, "GET", `/v2/echo/status-sync/${id}?wait=0`, undefined, 404, "not found");
      await expectError(srv, "GET", `/v2/echo/stream/${id}`, undefined, 404, "not found");
      await expectError(srv, "POST", `/v2/echo/cancel/${id}`, undefined, 404, "not found");
      await expectError(srv, "POST", `/v2/echo/retry/${id}`, undefined, 404, "not found");
    }
    await expectOnlyJobs(srv, [kept]);
  });
});

describe("payload size", () => {
  const MiB = 1024 * 1024;
  /** A valid job request of exactly `bytes` bytes. */
  const bodyOfSize = (bytes: number) => {
    const head = '{"input":{"pad":"';
    const tail = '"}}';
    return head + "x".repeat(bytes - head.length - tail.length) + tail;
  };

  test("/run takes a body just under 10 MB", async () => {
    await using srv = await startTestServer();
    const id = await accept(srv, bodyOfSize(9_990_000));
    await expectOnlyJobs(srv, [id]);
  });

  test("/run refuses a body over 10 MB with a 4xx {error}", async () => {
    await using srv = await startTestServer();
    await expectError(srv, "POST", "/v2/echo/run", bodyOfSize(10 * MiB + 1024), "4xx");
    await expectOnlyJobs(srv, []);
  });

  test("/runsync takes a body of 15 MB, between the /run and /runsync limits", async () => {
    await using srv = await startTestServer({ server: { takeWaitMs: 10_000 } });
    const w = protocolWorker(srv, "echo", "w1");
    const worker = (async () => {
      const job = await w.take();
      await w.done(job.id, { output: { bytes: (job.input.pad as string).length } });
    })();
    const [code, body] = await srv.json("POST", "/v2/echo/runsync?wait=10000", bodyOfSize(15_000_000));
    await worker;
    expect([code, body.status, body.output]).toEqual([200, "COMPLETED", { bytes: 15_000_000 - 20 }]);
  });

  test("/runsync refuses a body over 20 MB with a 4xx {error}", async () => {
    await using srv = await startTestServer();
    await expectError(srv, "POST", "/v2/echo/runsync?wait=1000", bodyOfSize(20 * MiB + 1024), "4xx");
    await expectOnlyJobs(srv, []);
  });

  test("a /run body over 10 MiB is 413 whether it declares its length or comes in chunks, and a chunked one under it is accepted", async () => {
    await using srv = await startTestServer();
    const headers = { authorization: `Bearer ${srv.key}`, "content-type": "application/json" };
    const chunked = (text: string) =>
      new ReadableStream({
        start(controller) {
          for (let i = 0; i < text.length; i += 1024 * 1024) controller.enqueue(new TextEncoder().encode(text.slice(i, i + 1024 * 1024)));
          controller.close();
        },
      });
    const over = JSON.stringify({ input: { pad: "x".repeat(10 * MiB) } });
    for (const body of [over, chunked(over)]) {
      const res = await fetch(`${srv.url}/v2/echo/run`, { method: "POST", headers, body });
      expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([
        413,
        `request body is larger than the limit of ${10 * MiB} bytes`,
      ]);
    }
    const under = await fetch(`${srv.url}/v2/echo/run`, {
      method: "POST",
      headers,
      body: chunked(JSON.stringify({ input: { pad: "x" } })),
    });
    expect([under.status, ((await under.json()) as { status: string }).status]).toEqual([200, "IN_QUEUE"]);
    expect((await srv.json("GET", "/v2/echo/health"))[1].jobs.inQueue).toBe(1);
  });

  test("a body over the server's 64 MiB cap is 413 with an {error} body, on client and worker routes", async () => {
    await using srv = await startTestServer();
    const huge = bodyOfSize(65 * MiB);
    await expectError(srv, "POST", "/v2/echo/run", huge, 413);
    await expectError(srv, "POST", "/v2/echo/job-done/w1/nope?gpu=test&isStream=false", huge, 413);
    await expectOnlyJobs(srv, []);
  });
});

describe("worker protocol bodies", () => {
  test("job-done and job-stream with a body that is not JSON or not an object are 400 and change nothing", async () => {
    await using srv = await startTestServer();
    const id = await accept(srv, { input: {} });
    const w = protocolWorker(srv, "echo", "w1");
    expect((await w.take()).id).toBe(id);
    const before = await srv.store.get("echo", id, srv.clock.now());
    for (const route of [`job-done/w1/${id}?gpu=test&isStream=false`, `job-stream/w1/${id}?gpu=test&isStream=false`]) {
      for (const body of ['{"output":', "output=1", "{output: 1}", '{"output": 1}}']) {
        await expectError(srv, "POST", `/v2/echo/${route}`, body, 400, "not valid JSON");
      }
      for (const body of [undefined, "", "  "]) await expectError(srv, "POST", `/v2/echo/${route}`, body, 400, "empty");
      for (const body of ["[]", '[{"output": 1}]', "1", '"done"', "null", "true"]) {
        await expectError(srv, "POST", `/v2/echo/${route}`, body, 400);
      }
    }
    await expectError(srv, "POST", `/v2/echo/job-done/w1/${id}`, { output: 1, stopPod: "yes" }, 400, "stopPod");
    expect(await srv.store.get("echo", id, srv.clock.now())).toEqual(before);
    expect(await srv.json("GET", `/v2/echo/status/${id}`)).toEqual([
      200,
      { id, status: "IN_PROGRESS", delayTime: expect.any(Number), workerId: "w1" },
    ]);
    expect(await srv.json("GET", `/v2/echo/stream/${id}`)).toEqual([200, { id, status: "IN_PROGRESS", stream: [] }]);
  });

  test("job-done with malformed JSON for an unknown job is 400 and registers no worker", async () => {
    await using srv = await startTestServer();
    await expectError(srv, "POST", "/v2/echo/job-done/w1/nope?gpu=test&isStream=false", '{"output":', 400, "not valid JSON");
    await expectError(srv, "POST", "/v2/echo/job-stream/w1/nope?gpu=test", "{", 400, "not valid JSON");
    await expectOnlyJobs(srv, []);
  });
});

// ---------------------------------------------------------------------------------------------
// Deterministic fuzz: requests that are invalid by construction, from a seeded generator.

interface FuzzRequest {
  kind: string;
  method: string;
  path: string;
  body?: string;
  headers: Record<string, string>;
}

/** Route names under /v2/<endpoint>/; a random path segment never equals one of them. */
const ROUTES = new Set([
  "run",
  "runsync",
  "status",
  "status-sync",
  "stream",
  "cancel",
  "retry",
  "purge-queue",
  "health",
  "requests",
  "job-take",
  "job-take-batch",
  "job-done",
  "job-stream",
  "ping",
  "job-stop",
  "job-files",
]);

function fuzzer(seed: number) {
  const rnd = seededRandom(seed);
  const int = (n: number) => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const chance = (p: number) => rnd() < p;

  const ALPHABET = "abcXYZ019 _-.~!*'();:@&=+$,/?#[]%{}\"\\<>|^`\t\n\u0000\u00e9\u4e2d\u{1f4a9}";
  const junk = (max = 24) => Array.from({ length: 1 + int(max) }, () => pick([...ALPHABET])).join("");

  const nonObject = (): unknown =>
    pick<() => unknown>([
      () => [],
      () => [junk(), int(100)],
      () => junk(),
      () => "",
      () => int(1_000_000) - 500_000,
      () => rnd() * 1e6,
      () => null,
      () => chance(0.5),
    ])();
  const anyValue = (): unknown => (chance(0.7) ? nonObject() : { [junk(8)]: nonObject() });

  /** A job request body that fails validation in exactly one randomly chosen way (or several). */
  const invalidPolicy = (): unknown =>
    pick<() => unknown>([
      () => ({
        executionTimeout: pick([
          5000,
          4999,
          0,
          -1,
          -int(1e9),
          5000.5,
          5001 + rnd() + 0.001,
          7 * 24 * 3600_000 + 1 + int(1e9),
          "6000",
          true,
          [],
          {},
        ]),
      }),
      () => ({ executionTimeout: int(5001) - int(1e6) }),
      () => ({ ttl: pick([9999, 0, -1, 604_800_001, 10_000.5, "10000", false, [10_000], {}]) }),
      () => ({ ttl: int(10_000) - int(1e6) }),
      () => ({ ttl: 604_800_001 + int(1e12) }),
      () => ({ lowPriority: pick(["yes", "true", "false", 0, 1, [], {}, junk()]) }),
      () => ({ [`x${junk(10)}`]: anyValue() }),
      () => ({ ttl: 10_000, executionTimeout: 6000, lowPriority: true, [`x${junk(6)}`]: 1 }),
      () => pick(["fast", 1, true, [], [{ ttl: 10_000 }], junk()]),
    ])();
  const invalidWebhook = (): unknown =>
    pick<() => unknown>([
      () =>
        pick(["ftp://example.com/h", "file:///etc/passwd", "javascript:alert(1)", "mailto:a@b.c", "//example.com", "example.com/h", ""]),
      () => `q${junk()}`, // never starts with http
      () => int(1000),
      () => [`http://${junk(5)}`],
      () => ({ url: "http://example.com" }),
      () => chance(0.5),
    ])();
  const invalidS3 = (): unknown => {
    const fields = ["accessId", "accessSecret", "bucketName", "endpointUrl"] as const;
    const s3: Record<string, unknown> = { ...VALID_S3 };
    const field = pick(fields);
    return pick<() => unknown>([
      () => {
        delete s3[field];
        return s3;
      },
      () => ({ ...s3, [field]: pick([1, true, null, [], {}, ""]) }),
      () => ({ ...s3, endpointUrl: pick(["not a url", "bucket.s3.example.com", "http//x", `q ${junk()}`]) }),
      () => pick(["AK:secret", 1, [], true]),
    ])();
  };
  const input = () => ({ prompt: junk(), n: int(100) });

  /** Text that JSON.parse refuses: a JSON document cut short or with a stray character put in. */
  const malformedJson = (): string => {
    for (;;) {
      const doc = JSON.stringify({ input: input(), policy: { ttl: 10_000 + int(1000) } });
      const text = chance(0.5)
        ? doc.slice(0, int(doc.length))
        : (() => {
            const at = int(doc.length + 1);
            return doc.slice(0, at) + pick(["{", "}", "[", "]", ":", ",", '"', "\\", "'", "x", "NaN"]) + doc.slice(at);
          })();
      try {
        JSON.parse(text);
      } catch {
        return text;
      }
    }
  };

  const invalidJobBody = (): string =>
    pick<() => string>([
      malformedJson,
      () => pick(["", " ", "\n", "\t \r\n"]),
      () => JSON.stringify(nonObject()),
      () =>
        JSON.stringify({
          [pick(["inputs", "Input", "INPUT", "data", "prompt", `x${junk(6)}`])]: input(),
          ...(chance(0.5) ? { policy: { ttl: 10_000 } } : {}),
        }),
      () => JSON.stringify({ input: nonObject() }),
      () => JSON.stringify({ input: input(), policy: invalidPolicy() }),
      () => JSON.stringify({ input: input(), webhook: invalidWebhook() }),
      () => JSON.stringify({ input: input(), s3Config: invalidS3() }),
      () => JSON.stringify({ input: nonObject(), policy: invalidPolicy(), webhook: invalidWebhook(), s3Config: invalidS3() }),
    ])();
  /** A worker-protocol body that is not a JSON object (every object is a valid job-done body). */
  const invalidWorkerBody = (): string => pick<() => string>([malformedJson, () => pick(["", "  "]), () => JSON.stringify(nonObject())])();

  const randomId = (): string =>
    pick<() => string>([
      () => [8, 4, 4, 4, 12].map((n) => Array.from({ length: n }, () => int(16).toString(16)).join("")).join(chance(0.8) ? "-" : ""),
      () => `sync-${int(1e9).toString(16)}`,
      () => encodeURIComponent(junk()),
      () => pick(["%25", "%2e%2e", "%00", "%E0%A4%A", "%ZZ", "%", "%F0%9F%92%A9", "..%2F..%2Fetc", "a%2Fb", "%3Fx%3D1"]),
      () => "z".repeat(1 + int(2000)),
    ])();
  const segment = (): string => {
    for (;;) {
      const s = encodeURIComponent(junk(12));
      if (!ROUTES.has(s) && s !== "echo" && s !== "" && s !== "." && s !== "..") return s;
    }
  };
  /** Never an integer; an out-of-range one is added by each caller. */
  const invalidInt = () => pick(["abc", "1.5", "1e3", "-", "0x10", "NaN", "Infinity", "%20", encodeURIComponent(`x${junk(6)}`)]);
  const contentType = (): Record<string, string> =>
    pick<Record<string, string>>([
      {},
      { "content-type": "application/json" },
      { "content-type": "application/x-www-form-urlencoded" },
      { "content-type": "text/plain" },
    ]);

  const requests: (() => Omit<FuzzRequest, "headers"> & { headers?: Record<string, string> })[] = [
    () => ({ kind: "run body", method: "POST", path: "/v2/echo/run", body: invalidJobBody(), headers: contentType() }),
    () => ({
      kind: "runsync body",
      method: "POST",
      path: `/v2/echo/runsync?wait=${pick(["1000", "5000"])}`,
      body: invalidJobBody(),
      headers: contentType(),
    }),
    () => ({
      kind: "runsync wait",
      method: "POST",
      path: `/v2/echo/runsync?wait=${pick([invalidInt(), String(int(1000)), String(300_001 + int(1e6)), String(-int(1e6))])}`,
      body: JSON.stringify({ input: input() }),
    }),
    () => ({ kind: "status", method: "GET", path: `/v2/echo/status/${randomId()}` }),
    () => ({
      kind: "status ttl",
      method: "GET",
      path: `/v2/echo/status/${randomId()}?ttl=${pick([invalidInt(), String(int(10_000)), String(604_800_001 + int(1e9)), "60000"])}`,
    }),
    () => ({ kind: "status-sync", method: "GET", path: `/v2/echo/status-sync/${randomId()}?wait=0` }),
    () => ({ kind: "stream", method: "GET", path: `/v2/echo/stream/${randomId()}` }),
    () => ({ kind: "cancel", method: "POST", path: `/v2/echo/cancel/${randomId()}`, body: chance(0.5) ? invalidWorkerBody() : undefined }),
    () => ({ kind: "retry", method: "POST", path: `/v2/echo/retry/${randomId()}` }),
    () => ({
      kind: "requests",
      method: "GET",
      path: `/v2/echo/requests?${chance(0.5) ? `limit=${pick([invalidInt(), "0", "101", String(101 + int(1e6))])}` : `cursor=${pick([invalidInt(), "-1", "+1", "1.5"])}`}`,
    }),
    () => ({
      kind: "job-done",
      method: "POST",
      path: `/v2/echo/job-done/${segment()}/${randomId()}?gpu=x&isStream=${chance(0.5)}`,
      body: invalidWorkerBody(),
      headers: contentType(),
    }),
    () => ({
      kind: "job-stream",
      method: "POST",
      path: `/v2/echo/job-stream/${segment()}/${randomId()}?gpu=x`,
      body: invalidWorkerBody(),
      headers: contentType(),
    }),
    () => ({
      kind: "take-batch",
      method: "GET",
      path: `/v2/echo/job-take-batch/${segment()}?batch_size=${pick([invalidInt(), "0", "65", String(65 + int(1e6))])}`,
    }),
    () => {
      const method = pick(["GET", "POST", "PUT", "DELETE", "PATCH"]);
      const path = `/v2/echo/${segment()}${chance(0.5) ? `/${randomId()}` : ""}`;
      return { kind: "unknown route", method, path, body: method === "GET" ? undefined : invalidJobBody() };
    },
    () => {
      // A real route with a method it does not have.
      const [method, path] = pick([
        ["GET", "/v2/echo/run"],
        ["PUT", "/v2/echo/runsync?wait=1000"],
        ["GET", "/v2/echo/purge-queue"],
        ["POST", "/v2/echo/health"],
        ["DELETE", "/v2/echo/requests"],
        ["GET", `/v2/echo/cancel/${randomId()}`],
        ["DELETE", `/v2/echo/status/${randomId()}`],
        ["POST", `/v2/echo/job-take/${segment()}`],
        ["GET", `/v2/echo/job-done/${segment()}/${randomId()}`],
      ] as const);
      return { kind: "wrong method", method, path, body: method === "GET" ? undefined : invalidJobBody() };
    },
    () => {
      const method = pick(["GET", "POST"]);
      const rest = pick(["run", "runsync?wait=1000", "health", `status/${randomId()}`, "purge-queue", "job-take/w1", segment()]);
      return {
        kind: "unknown endpoint",
        method,
        path: `/v2/${segment()}/${rest}`,
        body: method === "POST" ? JSON.stringify({ input: input() }) : undefined,
      };
    },
    () => ({ kind: "v2 root", method: pick(["GET", "POST"]), path: pick(["/v2", "/v2/", `/v2/${segment()}`]) }),
  ];

  return (): FuzzRequest => {
    const r = pick(requests)();
    const headers: Record<string, string> = { ...r.headers };
    return { ...r, headers };
  };
}

describe("fuzz", () => {
  const FUZZ_REQUESTS = 1200;

  test(`${FUZZ_REQUESTS} seeded malformed requests: each is 4xx with {error}, and nothing is created`, async () => {
    await using srv = await startTestServer();
    const next = fuzzer(0x5eed_2026);
    const rnd = seededRandom(7);
    const failures: unknown[] = [];
    const kinds = new Map<string, number>();
    for (let i = 0; i < FUZZ_REQUESTS; i++) {
      const req = next();
      kinds.set(req.kind, (kinds.get(req.kind) ?? 0) + 1);
      // Some go with a wrong key or none: 401 is a 4xx too.
      const auth = rnd() < 0.1 ? (rnd() < 0.5 ? null : "Bearer spool_wrong") : `Bearer ${srv.key}`;
      const headers = { ...req.headers, ...(auth ? { authorization: auth } : {}) };
      // A guard only: no request here may long-poll, so none comes near it.
      const res = await fetch(`${srv.url}${req.path}`, {
        method: req.method,
        headers,
        body: req.body,
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      const ok =
        res.status >= 400 &&
        res.status < 500 &&
        (res.headers.get("content-type") ?? "").includes("application/json") &&
        typeof body === "object" &&
        body !== null &&
        !Array.isArray(body) &&
        Object.keys(body).length === 1 &&
        typeof (body as { error?: unknown }).error === "string" &&
        (body as { error: string }).error.length > 0;
      if (!ok)
        failures.push({ i, ...req, body: req.body?.slice(0, 200), auth: auth !== null, status: res.status, response: text.slice(0, 300) });
    }
    expect(failures).toEqual([]);
    // Every kind of request was generated.
    expect(kinds.size).toBe(17);

    expect(await srv.json("GET", "/v2/echo/health")).toEqual([200, { jobs: NO_JOBS, workers: NO_WORKERS }]);
    expect(await srv.json("GET", "/v2/echo/requests?limit=100")).toEqual([200, { requests: [] }]);
    // And the server still takes good work.
    const id = await accept(srv, { input: { after: "fuzz" } });
    await expectOnlyJobs(srv, [id]);
  });
});
