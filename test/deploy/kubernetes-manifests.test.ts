import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { AllowedHosts } from "../../runtime/server/http/allowed-hosts.ts";
import { loadManifests, manifest, MANIFEST_DIR, serverConfig, type Manifest } from "./manifests.ts";

/** The model class of a manifest from kubernetes-models (core) or @kubernetes-models/keda (KEDA's CRDs). */
async function modelOf(doc: { apiVersion: string; kind: string }): Promise<new (data: unknown) => { validate(): void }> {
  const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : ["", doc.apiVersion];
  const path =
    group === "keda.sh"
      ? `@kubernetes-models/keda/keda.sh/${version}/${doc.kind}`
      : `kubernetes-models/${group ? `${group}/` : ""}${version}/${doc.kind}`;
  const mod = await import(path);
  return mod[doc.kind];
}

const all = loadManifests();
const containers = (pod: any): any[] => pod.spec.containers;
const env = (container: any, name: string) => container.env.find((e: any) => e.name === name);

describe("the Kubernetes manifests in docs/deploy/kubernetes", () => {
  test("every object validates against the Kubernetes and KEDA schemas", async () => {
    const kinds = all.map((m) => `${m.file}: ${m.doc.kind} ${m.doc.metadata.name}`);
    expect(kinds).toEqual([
      "cpu-workers.yaml: Deployment spool-embed",
      "cpu-workers.yaml: ScaledObject spool-embed",
      "gpu-workers.yaml: ScaledJob spool-sdxl",
      "keda-auth.yaml: TriggerAuthentication spool-read-only",
      "prometheus-scaledobject.yaml: ScaledObject spool-embed",
      "server.yaml: Secret spool",
      "server.yaml: ConfigMap spool-config",
      "server.yaml: Deployment spool-server",
      "server.yaml: Service spool",
    ]);
    for (const m of all) {
      const Model = await modelOf(m.doc);
      expect(() => new Model(m.doc).validate(), `${m.file} ${m.doc.kind}`).not.toThrow();
    }
  });

  test("the validation catches a wrong field type (it is not a no-op)", async () => {
    const bad = structuredClone(manifest(all, "cpu-workers.yaml", "ScaledObject", "spool-embed"));
    bad.spec.minReplicaCount = "zero";
    const Model = await modelOf(bad);
    expect(() => new Model(bad).validate()).toThrow("minReplicaCount");
  });

  test("the server runs the mounted config on the Secret's Redis store, with workers started elsewhere", () => {
    const config = serverConfig(all);
    expect(config.server.provider).toBe("external");
    const server = containers(manifest(all, "server.yaml", "Deployment", "spool-server").spec.template)[0];
    expect(server.args).toEqual(["serve", "--config", "/etc/spool/spool.toml", "--store", "$(SPOOL_STORE)"]);
    expect(env(server, "SPOOL_STORE").valueFrom.secretKeyRef).toEqual({ name: "spool", key: "store" });
    expect(manifest(all, "server.yaml", "Secret", "spool").stringData.store).toStartWith("redis://");
  });

  test("workers reach the Service at an endpoint the config declares, with the worker key; KEDA reads with the read-only key", () => {
    const config = serverConfig(all);
    const service = manifest(all, "server.yaml", "Service", "spool");
    const base = `http://${service.metadata.name}:${service.spec.ports[0].port}`;
    // The server answers for that host (server.allowedHosts), and for the pod IP its probes use.
    const hosts = new AllowedHosts(config.server);
    expect([hosts.allows(new URL(base).host), hosts.allows("10.244.1.7:8080")]).toEqual([true, true]);
    for (const m of all)
      for (const url of JSON.stringify(m.doc).match(/http:\/\/spool[^"/]*/g) ?? [])
        expect([m.file, hosts.allows(new URL(url).host)]).toEqual([m.file, true]);
    const secret = manifest(all, "server.yaml", "Secret", "spool");
    const pods: Array<[string, any]> = [
      ["embed", manifest(all, "cpu-workers.yaml", "Deployment", "spool-embed").spec.template],
      ["sdxl", manifest(all, "gpu-workers.yaml", "ScaledJob", "spool-sdxl").spec.jobTargetRef.template],
    ];
    for (const [endpoint, pod] of pods) {
      const worker = containers(pod)[0];
      expect(worker.args).toEqual(["--url", base, "--endpoint", endpoint]);
      expect(config.endpoints[endpoint]).toBeDefined();
      const keyRef = env(worker, "SPOOL_API_KEY").valueFrom.secretKeyRef;
      expect(keyRef).toEqual({ name: "spool", key: "worker-key" });
      expect(Object.keys(secret.stringData)).toContain(keyRef.key);
    }
    const auth = manifest(all, "keda-auth.yaml", "TriggerAuthentication", "spool-read-only");
    expect(auth.spec.secretTargetRef).toEqual([{ parameter: "token", name: "spool", key: "read-only-key" }]);
    expect(Object.keys(secret.stringData)).toContain("read-only-key");
  });

  test("CPU workers scale from zero to workersMax; GPU workers are one-GPU Jobs that exit when idle", () => {
    const config = serverConfig(all);
    const scaled = manifest(all, "cpu-workers.yaml", "ScaledObject", "spool-embed");
    expect(scaled.spec.scaleTargetRef.name).toBe(manifest(all, "cpu-workers.yaml", "Deployment", "spool-embed").metadata.name);
    expect([scaled.spec.minReplicaCount, scaled.spec.maxReplicaCount]).toEqual([
      config.endpoints.embed!.workersMin,
      config.endpoints.embed!.workersMax,
    ]);
    const job = manifest(all, "gpu-workers.yaml", "ScaledJob", "spool-sdxl");
    expect(job.spec.maxReplicaCount).toBe(config.endpoints.sdxl!.workersMax);
    const pod = job.spec.jobTargetRef.template;
    expect(pod.spec.restartPolicy).toBe("Never");
    expect(containers(pod)[0].resources.limits["nvidia.com/gpu"]).toBe(1);
    expect(Number(env(containers(pod)[0], "SPOOL_EXIT_WHEN_IDLE_MS").value)).toBeGreaterThan(0);
  });

  test("terminationGracePeriodSeconds outlasts the drain: drain timeout plus the 5 s grace", () => {
    const config = serverConfig(all);
    const pods: Array<[any, number]> = [
      [manifest(all, "cpu-workers.yaml", "Deployment", "spool-embed").spec.template, config.endpoints.embed!.executionTimeout],
      [manifest(all, "gpu-workers.yaml", "ScaledJob", "spool-sdxl").spec.jobTargetRef.template, config.endpoints.sdxl!.executionTimeout],
    ];
    for (const [pod, executionTimeout] of pods) {
      const drainMs = Number(env(containers(pod)[0], "SPOOL_DRAIN_TIMEOUT_MS").value);
      expect(drainMs).toBeLessThanOrEqual(executionTimeout);
      expect(pod.spec.terminationGracePeriodSeconds).toBeGreaterThan(drainMs / 1000 + 5);
    }
  });

  test("the Containerfile starts from a glibc base with libstdc++, not musl", () => {
    const text = readFileSync(join(MANIFEST_DIR, "Containerfile"), "utf8");
    expect(text).toMatch(/^ARG BASE=gcr\.io\/distroless\/cc-debian12/m);
    expect(text).toMatch(/^ENTRYPOINT \["\/usr\/local\/bin\/app"\]$/m);
    expect(text).not.toMatch(/^FROM .*alpine/im);
  });
});

export type { Manifest };
