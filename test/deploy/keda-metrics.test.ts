import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../runtime/clock.ts";
import { parseConfig } from "../../runtime/config/config.ts";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { createStore, storeOptions } from "../../runtime/server/store/create-store.ts";
import { Exposition } from "../helpers/prometheus.ts";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { startTestServer, type TestServer } from "../helpers/test-server.ts";
import { gjsonGet, loadManifests, manifest, promSelector } from "./manifests.ts";

const all = loadManifests();
const secret = manifest(all, "server.yaml", "Secret", "spool");
const service = manifest(all, "server.yaml", "Service", "spool");
const auth = manifest(all, "keda-auth.yaml", "TriggerAuthentication", "spool-read-only");
const SERVICE_ORIGIN = `http://${service.metadata.name}:${service.spec.ports[0].port}`;

type Backend = "sqlite" | "redis";

/** The server the manifests describe: their spool.toml's endpoints, on a real port, on either store. */
async function manifestServer(clock: ManualClock, backend: Backend): Promise<TestServer> {
  const toml = Bun.TOML.parse(manifest(all, "server.yaml", "ConfigMap", "spool-config").data["spool.toml"]) as any;
  const store =
    backend === "redis"
      ? await createStore(`${await redisUrl()}?prefix=keda-${crypto.randomUUID().slice(0, 8)}`, storeOptions(parseConfig({})))
      : undefined;
  return startTestServer({ clock, store, server: { provider: toml.server.provider }, endpoints: toml.endpoints });
}

/**
 * What KEDA's metrics-api scaler does with a trigger: GET its url (the Service's origin swapped
 * for the test server's) with the TriggerAuthentication's token as a bearer, and take the value
 * at valueLocation.
 */
async function kedaReads(srv: TestServer, trigger: any, secretValues: Record<string, string>): Promise<number> {
  expect(trigger.type).toBe("metrics-api");
  expect(trigger.metadata).toMatchObject({ format: "json", authMode: "bearer", targetValue: "1" });
  expect(trigger.authenticationRef.name).toBe(auth.metadata.name);
  const token = auth.spec.secretTargetRef.find((r: any) => r.parameter === "token");
  expect(token.name).toBe(secret.metadata.name);
  const url: string = trigger.metadata.url;
  expect(url).toStartWith(`${SERVICE_ORIGIN}/`);
  const res = await fetch(srv.url + url.slice(SERVICE_ORIGIN.length), { headers: { authorization: `Bearer ${secretValues[token.key]}` } });
  expect(res.status).toBe(200);
  const value = gjsonGet(await res.text(), trigger.metadata.valueLocation);
  expect(typeof value).toBe("number");
  return value as number;
}

/** What KEDA's Prometheus scaler gets for the trigger's query, from a scrape of /metrics. */
async function prometheusReads(srv: TestServer, trigger: any, key: string): Promise<number> {
  expect(trigger.type).toBe("prometheus");
  const { metric, labels } = promSelector(trigger.metadata.query);
  const res = await srv.call("GET", "/metrics", undefined, { auth: `Bearer ${key}` });
  expect(res.status).toBe(200);
  return new Exposition(await res.text()).value(metric, labels);
}

describe.each<Backend>(["sqlite", "redis"])("KEDA reads Spool's scale rule (%s store)", (backend) => {
  test("the CPU ScaledObject's metrics-api trigger and the Prometheus one follow REQUEST_COUNT as jobs queue, run and drain", async () => {
    const clock = new ManualClock();
    await using srv = await manifestServer(clock, backend);
    const { key } = await createKey(srv.store, "keda", clock.now(), { scope: "read-only" });
    const secretValues = { ...secret.stringData, "read-only-key": key };
    const metricsApi = manifest(all, "cpu-workers.yaml", "ScaledObject", "spool-embed").spec.triggers[0];
    const prometheus = manifest(all, "prometheus-scaledobject.yaml", "ScaledObject", "spool-embed").spec.triggers[0];
    const read = async () => [await kedaReads(srv, metricsApi, secretValues), await prometheusReads(srv, prometheus, key)];

    expect(await read()).toEqual([0, 0]);
    const ids: string[] = [];
    for (let i = 0; i < 9; i++) ids.push((await srv.json("POST", "/v2/embed/run", { input: { i } }))[1].id);
    // scalerValue 4 jobs per worker: ceil(9 / 4).
    expect(await read()).toEqual([3, 3]);
    const w = protocolWorker(srv, "embed", "pod-a");
    const taken = [await w.take(), await w.take()];
    expect(await read()).toEqual([3, 3]);
    for (const job of taken) await w.done(job.id, { output: "ok" });
    expect(await read()).toEqual([2, 2]);
    for (let job = await w.take(); job; job = await w.take()) await w.done(job.id, { output: "ok" });
    expect(await read()).toEqual([0, 0]);
  });

  test("the GPU ScaledJob's trigger follows QUEUE_DELAY: one from zero at once, one more after scalerValue seconds of waiting", async () => {
    const clock = new ManualClock();
    await using srv = await manifestServer(clock, backend);
    const { key } = await createKey(srv.store, "keda", clock.now(), { scope: "read-only" });
    const secretValues = { ...secret.stringData, "read-only-key": key };
    const trigger = manifest(all, "gpu-workers.yaml", "ScaledJob", "spool-sdxl").spec.triggers[0];
    const scaling = async () => (await srv.json("GET", "/v2/sdxl/scaling", undefined, { auth: `Bearer ${key}` }))[1];

    expect(await kedaReads(srv, trigger, secretValues)).toBe(0);
    await srv.json("POST", "/v2/sdxl/run", { input: { prompt: "a" } });
    await srv.json("POST", "/v2/sdxl/run", { input: { prompt: "b" } });
    expect(await kedaReads(srv, trigger, secretValues)).toBe(1);

    const w = protocolWorker(srv, "sdxl", "gpu-pod-1");
    expect((await w.ping()).status).toBe(200);
    clock.advance(3_999);
    expect(await kedaReads(srv, trigger, secretValues)).toBe(1);
    clock.advance(1);
    expect(await scaling()).toEqual({
      endpointId: "sdxl",
      queued: 2,
      queuedLowPriority: 0,
      inProgress: 0,
      oldestQueuedAgeSeconds: 4,
      workers: 1,
      desiredWorkers: 2,
      workersMin: 0,
      workersMax: 4,
    });
    const exposition = new Exposition(await (await srv.call("GET", "/metrics", undefined, { auth: `Bearer ${key}` })).text());
    expect(exposition.value("spool_queue_oldest_age_seconds", { endpoint: "sdxl" })).toBe(4);
    expect(exposition.value("spool_desired_workers", { endpoint: "sdxl" })).toBe(2);

    // The one worker takes both in turn: nothing waits, so the rule keeps the workers it has...
    for (let job = await w.take(); job; job = await w.take()) await w.done(job.id, { output: "image" });
    expect(await kedaReads(srv, trigger, secretValues)).toBe(1);
    // ...until it has been idle for the endpoint's idleTimeout (5 s): then none is wanted, so a
    // ScaledObject on this trigger scales in too. Its heartbeat goes on meanwhile.
    clock.advance(4_999);
    expect((await w.ping()).status).toBe(200);
    expect(await kedaReads(srv, trigger, secretValues)).toBe(1);
    clock.advance(1);
    expect(await scaling()).toMatchObject({ queued: 0, workers: 1, desiredWorkers: 0 });
  });

  test("/scaling answers a read-only or client key; a worker key gets 401 and an unknown endpoint 404", async () => {
    await using srv = await manifestServer(new ManualClock(), backend);
    const keyOf = async (scope: "read-only" | "client" | "worker") => (await createKey(srv.store, scope, srv.clock.now(), { scope })).key;
    const get = async (path: string, key: string) => {
      const res = await srv.call("GET", path, undefined, { auth: `Bearer ${key}` });
      return [res.status, await res.json()];
    };
    expect((await get("/v2/embed/scaling", await keyOf("read-only")))[0]).toBe(200);
    expect((await get("/v2/embed/scaling", await keyOf("client")))[0]).toBe(200);
    expect(await get("/v2/embed/scaling", await keyOf("worker"))).toEqual([
      401,
      { error: "this API key is a worker key; scaling needs a client key" },
    ]);
    expect(await get("/v2/nope/scaling", srv.key)).toEqual([404, { error: "endpoint nope not found" }]);
  });
});
