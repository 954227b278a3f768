import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import { parseConfig, type Config } from "../../runtime/config/config.ts";

/** The folder of the Kubernetes manifests the docs ship. */
export const MANIFEST_DIR = resolve(import.meta.dir, "../../docs/deploy/kubernetes");

export interface Manifest {
  file: string;
  doc: any;
}

/** Every object of every .yaml file in the folder, parsed by a YAML 1.2 parser (errors thrown). */
export function loadManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(MANIFEST_DIR)
    .filter((f) => f.endsWith(".yaml"))
    .sort()) {
    for (const d of parseAllDocuments(readFileSync(join(MANIFEST_DIR, file), "utf8"))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors.map(String).join("; ")}`);
      out.push({ file, doc: d.toJS() });
    }
  }
  return out;
}

/** The one object of `kind` named `name` in `file`. */
export function manifest(all: Manifest[], file: string, kind: string, name: string): any {
  const found = all.filter((m) => m.file === file && m.doc.kind === kind && m.doc.metadata?.name === name);
  if (found.length !== 1) throw new Error(`${file}: expected one ${kind} ${name}, found ${found.length}`);
  return found[0]!.doc;
}

/** The Spool config the server Deployment mounts (spool.toml of the spool-config ConfigMap). */
export function serverConfig(all: Manifest[]): Config {
  const toml = manifest(all, "server.yaml", "ConfigMap", "spool-config").data["spool.toml"];
  return parseConfig(Bun.TOML.parse(toml), "server.yaml spool-config");
}

/**
 * KEDA's metrics-api valueLocation (a GJSON path), for the plain form GJSON shares with every
 * path syntax: object keys and array indexes separated by dots. No GJSON implementation is
 * published on npm, so any of GJSON's special characters throws rather than being guessed at.
 */
export function gjsonGet(json: string, path: string): unknown {
  if (/[|#@*?!\\]/.test(path)) throw new Error(`valueLocation ${path} uses GJSON syntax beyond plain keys`);
  let v: unknown = JSON.parse(json);
  for (const key of path.split(".")) {
    if (v === null || typeof v !== "object" || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/**
 * The metric and label matchers of a PromQL query of the form `agg(metric{label="value",...})`
 * (what the manifests' Prometheus triggers use); anything else throws.
 */
export function promSelector(query: string): { agg: string; metric: string; labels: Record<string, string> } {
  const m = /^\s*(max|sum|min)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}\s*\)\s*$/.exec(query);
  if (!m) throw new Error(`query ${query} is not agg(metric{labels})`);
  const labels: Record<string, string> = {};
  for (const part of m[3]!.split(",").filter((p) => p.trim())) {
    const l = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"\s*$/.exec(part);
    if (!l) throw new Error(`matcher ${part} is not label="value"`);
    labels[l[1]!] = l[2]!;
  }
  return { agg: m[1]!, metric: m[2]!, labels };
}
