import { describe, expect, test } from "bun:test";
import { ConfigError, findEndpoint, parseConfig } from "../../runtime/config/config.ts";
import { startTestServer } from "../helpers/test-server.ts";

// A string from a request (an endpoint id, a route name, an option) must only ever find an
// object's own properties: `/v2/constructor/run` names no endpoint, whatever the method.

/** Names that a plain object answers through its prototype. */
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype);
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** Every route under /v2/<endpoint>, with whatever ids the route takes. */
const ROUTES = [
  "run",
  "runsync",
  "status/x",
  "status-sync/x",
  "stream/x",
  "cancel/x",
  "retry/x",
  "purge-queue",
  "health",
  "requests",
  "job-take/w",
  "job-take-batch/w",
  "job-done/w/x",
  "job-stream/w/x",
  "ping/w",
  "job-stop/w",
  "job-files/w/x/f.txt",
  "openai/v1/chat/completions",
  "compat/v1/completions",
  "openai/v1/models",
];

describe("request strings find own properties only", () => {
  test("an endpoint id named like an Object.prototype property is 404 on every route and method", async () => {
    await using srv = await startTestServer();
    const wrong: string[] = [];
    for (const name of PROTOTYPE_NAMES) {
      for (const route of ROUTES) {
        for (const method of METHODS) {
          const res = await srv.call(method, `/v2/${name}/${route}`, method === "GET" ? undefined : { input: {} });
          const text = await res.text();
          const ok = res.status === 404 && JSON.parse(text).error !== undefined;
          if (!ok) wrong.push(`${method} /v2/${name}/${route} -> ${res.status} ${text.slice(0, 80)}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    // Nothing was queued anywhere by them.
    const [, requests] = await srv.json("GET", "/v2/echo/requests");
    expect(requests).toEqual({ requests: [] });
  });

  test("route names and ids named like prototype properties are 404 on a real endpoint", async () => {
    await using srv = await startTestServer();
    for (const name of PROTOTYPE_NAMES) {
      for (const path of [`/v2/echo/${name}`, `/v2/echo/status/${name}`, `/v2/echo/openai/v1/${name}`, `/files/${name}/${name}/${name}`]) {
        const res = await srv.call("GET", path);
        expect({ path, status: res.status }).toEqual({ path, status: path.startsWith("/files/") ? 403 : 404 });
      }
    }
  });

  test("an endpoint named constructor is a real endpoint; __proto__ is refused in config", async () => {
    await using srv = await startTestServer({ endpoints: { constructor: {}, toString: {} } });
    const [code, body] = await srv.json("POST", "/v2/constructor/run", { input: { n: 1 } });
    expect({ code, status: body.status }).toEqual({ code: 200, status: "IN_QUEUE" });
    expect((await srv.json("GET", "/v2/valueOf/health"))[0]).toBe(404);
    expect((await srv.json("GET", "/v2/toString/health"))[0]).toBe(200);

    const raw = JSON.parse('{"endpoints": {"__proto__": {"workersMax": 1}}}');
    expect(() => parseConfig(raw)).toThrow(ConfigError);
    expect(() => parseConfig(raw)).toThrow(/__proto__/);
  });

  test("findEndpoint answers only configured endpoints, even on a config built by hand", () => {
    const config = parseConfig({ endpoints: { echo: {} } });
    expect(findEndpoint(config, "echo")).toBe(config.endpoints.echo!);
    for (const name of PROTOTYPE_NAMES) expect(findEndpoint(config, name)).toBeUndefined();
    config.endpoints = { other: config.endpoints.echo! };
    for (const name of PROTOTYPE_NAMES) expect(findEndpoint(config, name)).toBeUndefined();
    expect(Object.keys(config.endpoints)).toEqual(["other"]);
  });
});
