// Seeded generation of hostile and ordinary requests against every route the server serves.

/** sfc32: a small, fast, seedable generator; the same seed gives the same requests. */
export class Random {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    this.#a = 0x9e3779b9;
    this.#b = 0x243f6a88;
    this.#c = 0xb7e15162;
    this.#d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.next();
  }

  /** A float in [0, 1). */
  next(): number {
    this.#a >>>= 0;
    this.#b >>>= 0;
    this.#c >>>= 0;
    this.#d >>>= 0;
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  int(max: number): number {
    return Math.floor(this.next() * max);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

/** One request to send: what the fuzz test needs to send it and judge the answer. */
export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** The route family, for the summary. */
  family: string;
}

/** What the generator draws on: keys of each kind, endpoints, and ids seen in earlier answers. */
export interface FuzzWorld {
  keys: { full: string; client: string; worker: string; readOnly: string; restricted: string; revoked: string };
  endpoints: string[];
  jobIds: string[];
  fileUrls: string[];
}

const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype);
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "PURGE"];

const ODD_IDS = [
  ...PROTOTYPE_NAMES,
  "..",
  ".",
  "%2e%2e",
  "%2E",
  "a%2Fb",
  "%2F",
  "%5C",
  "..%2F..%2Fetc%2Fpasswd",
  "%00",
  "%zz",
  "%",
  "%F0%9F%92%A9",
  encodeURIComponent("中文💩"),
  "%C0%AF", // an overlong UTF-8 slash
  "%FF%FE",
  "a&job_in_progress=1",
  "%20",
  "x".repeat(300),
  "y".repeat(5_000),
  "sync-00000000-0000-0000-0000-000000000000",
  "-1",
  "1e999",
  "null",
  "undefined",
  "NaN",
];

const QUERY_VALUES = [
  "",
  "0",
  "-1",
  "1",
  "1000",
  "90000",
  "300001",
  "1e999",
  "9007199254740993",
  "NaN",
  "abc",
  "%00",
  "__proto__",
  "1.5",
  " 5",
  "true",
  "unhealthy",
  "x".repeat(3_000),
];
const QUERY_NAMES = [
  "wait",
  "ttl",
  "limit",
  "cursor",
  "batch_size",
  "job_id",
  "status",
  "isStream",
  "expires",
  "sig",
  "gpu",
  "__proto__",
  "constructor",
  "check",
  "reason",
  "job_in_progress",
];

/** Valid JSON of arbitrary shape (objects, arrays, odd numbers and strings). */
function jsonValue(r: Random, depth = 0): unknown {
  const roll = r.int(depth > 3 ? 6 : 9);
  switch (roll) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.pick([0, -0, 1, -1, 1.5, 2 ** 53 + 1, -(2 ** 63), 1e308, 5e-324, 123456789]);
    case 3:
      return r.pick(["", "text", "中文💩", "\u0000", "\ud800", "x".repeat(1_000), "__proto__", "<script>"]);
    case 4:
    case 5:
      return r.pick(PROTOTYPE_NAMES);
    case 6:
      return Array.from({ length: r.int(4) }, () => jsonValue(r, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = r.int(4); i > 0; i--)
        out[r.pick(["a", "input", "policy", "ttl", "messages", "prompt", "stream", "output", "error", ...PROTOTYPE_NAMES])] = jsonValue(
          r,
          depth + 1,
        );
      return out;
    }
  }
}

/** JSON text with prototype keys as real own keys (what JSON.parse makes of them). */
function protoKeyed(r: Random): string {
  const inner = JSON.stringify(jsonValue(r));
  return r.pick([
    `{"__proto__": {"polluted": true}, "input": {}}`,
    `{"input": {"__proto__": {"isAdmin": true}}}`,
    `{"input": {}, "policy": {"__proto__": {"ttl": 1}}}`,
    `{"constructor": {"prototype": {"polluted": 1}}, "input": ${inner}}`,
    `{"input": {"constructor": {"prototype": {}}}, "webhook": {"__proto__": "x"}}`,
    `{"messages": [{"__proto__": {"role": "user"}, "content": "hi"}]}`,
    `{"status": "COMPLETED", "output": {"__proto__": {}}, "__proto__": {"error": "x"}}`,
  ]);
}

function deepNesting(r: Random): string {
  const depth = r.pick([100, 1_000, 10_000, 100_000]);
  if (r.chance(0.5)) return `${"[".repeat(depth)}${"]".repeat(depth)}`;
  return `{"input": ${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}`;
}

function hugeNumbers(r: Random): string {
  const n = r.pick(["1e999", "-1e999", "123456789012345678901234567890", "1e-400", "-0", "9007199254740993", "0.1e1000000"]);
  return r.pick([
    `{"input": {"n": ${n}}}`,
    `{"input": {}, "policy": {"executionTimeout": ${n}, "ttl": ${n}}}`,
    `{"input": {}, "policy": {"ttl": ${n}, "lowPriority": ${n}}}`,
    `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ${n}, "temperature": ${n}}`,
    `{"status": "COMPLETED", "output": ${n}}`,
  ]);
}

/** A plausible body for the route, then bent in one of many ways. */
function body(r: Random, world: FuzzWorld, op: string): string | Uint8Array | undefined {
  const plausible = (): string => {
    switch (op) {
      case "openai":
        return JSON.stringify(
          r.chance(0.5)
            ? { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: r.int(4), stream: r.chance(0.3) }
            : { model: "m", prompt: "hi", max_tokens: 2, stream: r.chance(0.3) },
        );
      case "job-done":
        return JSON.stringify(
          r.pick([{ output: jsonValue(r) }, { error: "boom" }, { status: "IN_PROGRESS", output: 1 }, { output: { cost: -1 } }]),
        );
      case "job-stream":
        return JSON.stringify({ output: jsonValue(r) });
      default:
        return JSON.stringify({
          input: r.chance(0.2) ? { prompt: "a cat", width: 64, height: 64, steps: 1 } : jsonValue(r),
          ...(r.chance(0.2)
            ? { policy: { ttl: r.pick([10_000, 60_000, 1, 1e12]), executionTimeout: r.pick([5_001, 1, 1e12]), lowPriority: r.chance(0.5) } }
            : {}),
          ...(r.chance(0.1) ? { webhook: r.pick(["http://127.0.0.1:9/hook", "not a url", "file:///etc/passwd", "http://[::1]:9/"]) } : {}),
          ...(r.chance(0.05)
            ? { s3Config: { accessId: "a", accessSecret: "b", bucketName: "c", endpointUrl: "http://127.0.0.1:9/" } }
            : {}),
        });
    }
  };
  switch (r.int(16)) {
    case 0:
      return undefined;
    case 1: {
      const text = plausible();
      return text.slice(0, r.int(text.length)); // truncated JSON
    }
    case 2:
      return deepNesting(r);
    case 3:
      return hugeNumbers(r);
    case 4:
      return protoKeyed(r);
    case 5:
      return new Uint8Array([0x7b, 0x22, 0x69, 0x6e, 0x70, 0x75, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0xaf, 0x22, 0x7d]); // {"input":"<invalid UTF-8>"}
    case 6:
      return r.pick(["", " ", "null", "[]", '"text"', "123", "true", "{}", "{,}", "\u0000", "{'input': {}}"]);
    case 7:
      return JSON.stringify(jsonValue(r));
    case 8: {
      // Past the 10 MiB /run and 20 MiB /runsync and OpenAI limits, now and then (it is slow to send).
      const mib = op === "run" ? 10 : op === "runsync" || op === "openai" ? 20 : 0;
      return mib && r.chance(0.3) ? `{"input": {"x": "${"x".repeat(mib * 1024 * 1024 + 16)}"}}` : plausible();
    }
    default:
      return plausible();
  }
}

function authHeader(r: Random, world: FuzzWorld): string | undefined {
  const k = world.keys;
  switch (r.int(24)) {
    case 0:
      return undefined;
    case 1:
      return "Bearer";
    case 2:
      return "Bearer spool_not_a_real_key";
    case 3:
      return `Basic ${btoa("user:pass")}`;
    case 4:
      return `bearer ${k.full}`;
    case 5:
      return `Bearer  ${k.full} `;
    case 6:
      return `Bearer ${k.revoked}`;
    case 7:
      return `Bearer ${"k".repeat(8_000)}`;
    case 8:
      return r.chance(0.5) ? `Bearer ${k.client}` : k.client;
    case 9:
      return r.chance(0.5) ? `Bearer ${k.worker}` : k.worker;
    case 10:
      return `Bearer ${k.readOnly}`;
    case 11:
      return `Bearer ${k.restricted}`;
    case 12:
      return k.full; // the bare form, as runpod-python sends it
    default:
      return `Bearer ${k.full}`;
  }
}

function id(r: Random, world: FuzzWorld): string {
  if (world.jobIds.length && r.chance(0.4)) return r.pick(world.jobIds);
  return r.chance(0.7) ? r.pick(ODD_IDS) : crypto.randomUUID();
}

function query(r: Random): string {
  if (r.chance(0.5)) return "";
  const parts: string[] = [];
  for (let i = 1 + r.int(3); i > 0; i--) parts.push(`${r.pick(QUERY_NAMES)}=${encodeURIComponent(r.pick(QUERY_VALUES))}`);
  return `?${parts.join("&")}`;
}

const CONTENT_TYPES = [
  "application/json",
  "application/json",
  "application/x-www-form-urlencoded",
  "text/plain",
  "multipart/form-data; boundary=x",
  "application/json; charset=latin1",
  "image/png",
  "application/octet-stream",
  "",
];

/** The path (and route family) of one request: the job API, the worker protocol, OpenAI, files, the rest. */
function route(r: Random, world: FuzzWorld): { path: string; family: string; op: string } {
  const ep = r.chance(0.85) ? r.pick(world.endpoints) : r.pick([...ODD_IDS, "nowhere", "ECHO"]);
  const worker = r.chance(0.7) ? r.pick(["w1", "w2", "fuzz-worker"]) : r.pick(ODD_IDS);
  const v2 = `/v2/${ep}`;
  switch (r.int(12)) {
    case 0:
    case 1: {
      const op = r.pick(["run", "runsync", "purge-queue", "health", "requests"]);
      return { path: `${v2}/${op}${query(r)}`, family: "job API", op };
    }
    case 2:
    case 3: {
      const op = r.pick(["status", "status-sync", "stream", "cancel", "retry"]);
      return { path: `${v2}/${op}/${id(r, world)}${query(r)}`, family: "job API", op };
    }
    case 4:
    case 5: {
      const op = r.pick(["job-take", "job-take-batch", "ping", "job-stop", "job-done", "job-stream", "job-files"]);
      const tail =
        op === "job-done" || op === "job-stream"
          ? `/${id(r, world)}`
          : op === "job-files"
            ? `/${id(r, world)}/${r.pick(["out.png", "..", ".type", "a%2Fb", "x".repeat(300), "中.txt"])}`
            : "";
      return { path: `${v2}/${op}/${worker}${tail}${query(r)}`, family: "worker protocol", op };
    }
    case 6:
    case 7: {
      const iface = r.pick(["openai", "compat"]);
      const op = r.pick(["chat/completions", "completions", "models", "embeddings", "__proto__", "chat/completions/"]);
      return { path: `${v2}/${iface}/v1/${op}${query(r)}`, family: "OpenAI-compatible", op: "openai" };
    }
    case 8: {
      if (world.fileUrls.length && r.chance(0.5)) {
        const url = new URL(r.pick(world.fileUrls));
        const path = r.chance(0.5)
          ? url.pathname + url.search
          : `${url.pathname}?expires=${r.pick(QUERY_VALUES)}&sig=${url.searchParams.get("sig")}`;
        return { path, family: "files", op: "files" };
      }
      return {
        path: `/files/${ep}/${id(r, world)}/${r.pick(["out.png", "..", "%2e%2e", ".out.png.type"])}${query(r)}`,
        family: "files",
        op: "files",
      };
    }
    case 9: {
      const sub = r.pick([
        "endpoints",
        "events",
        `endpoints/${ep}/stats`,
        `endpoints/${ep}/jobs/${id(r, world)}`,
        `endpoints/${ep}/jobs`,
        "__proto__",
      ]);
      return { path: `/dashboard/api/${sub}${query(r)}`, family: "dashboard", op: "dashboard" };
    }
    case 10: {
      const path = r.pick([
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/",
        "/docs/scalar.js",
        "/dashboard",
        "/dashboard/",
        "/dashboard/index.js",
        "/_bun/client/index.js",
        "/",
        "/health",
        "/favicon.ico",
      ]);
      return { path: `${path}${query(r)}`, family: "service pages", op: "page" };
    }
    default: {
      const path = r.pick([
        "//v2//echo//run",
        "/v2/echo/run/",
        "/V2/ECHO/RUN",
        "/v2/",
        "/v2",
        "/v2/echo",
        `/v2/echo/${r.pick(ODD_IDS)}`,
        "/v2/echo/status/",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/v3/echo/run",
        `/v2/echo/run%00`,
      ]);
      return { path, family: "odd paths", op: "odd" };
    }
  }
}

/** Draws one request. */
export function fuzzRequest(r: Random, world: FuzzWorld): FuzzRequest {
  const { path, family, op } = route(r, world);
  const natural =
    op === "run" ||
    op === "runsync" ||
    op === "purge-queue" ||
    op === "cancel" ||
    op === "retry" ||
    op === "openai" ||
    op === "job-done" ||
    op === "job-stream"
      ? "POST"
      : op === "job-files"
        ? "PUT"
        : "GET";
  const method = r.chance(0.75) ? natural : r.pick(METHODS);
  const headers: Record<string, string> = {};
  const auth = authHeader(r, world);
  if (auth !== undefined) headers.authorization = auth;
  const canHaveBody = method !== "GET" && method !== "HEAD";
  const sent = canHaveBody ? body(r, world, op) : undefined;
  if (sent !== undefined || r.chance(0.2)) headers["content-type"] = r.pick(CONTENT_TYPES);
  if (r.chance(0.15)) headers.accept = "text/event-stream";
  if (r.chance(0.05)) headers["last-event-id"] = r.pick(["0", "-1", "1e999", "__proto__", "9".repeat(400), "3:abc", ""]);
  if (r.chance(0.05)) headers["x-request-id"] = r.pick(["", "x".repeat(1_000), "__proto__", "a\tb"]);
  if (!headers["content-type"]) delete headers["content-type"];
  return { method, path, headers, body: sent, family };
}
