import { describe, expect, test } from "bun:test";
import { Glob } from "bun";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import * as ts from "typescript";

/**
 * docs/reference/code-layout.md: imports point down. Every import of runtime/, sdk/ and handlers/
 * (type-only ones too) is held against the layers that page writes, highest first: a file may
 * import the files of its own folder and those of a lower layer, never a higher one, nor another
 * folder of its own layer; and no files may import each other in a loop.
 */

const ROOT = join(import.meta.dir, "../..");

/**
 * code-layout.md "The repository", row by row: [layer, paths]. The paths of one row are one unit
 * (they may import each other); rows of one layer stand side by side. `dir/*.ts` is the files
 * directly in dir.
 */
const REPOSITORY: Row[] = [
  [6, ["runtime/cli.ts", "runtime/cli/"]],
  [5, ["sdk/testing.ts"]],
  [4, ["runtime/server/"]],
  [4, ["runtime/worker/"]],
  [4, ["runtime/build/"]],
  [4, ["handlers/"]],
  [3, ["sdk/"]],
  [2, ["runtime/config/"]],
  [2, ["runtime/process/"]],
  [1, ["runtime/protocol/"]],
  [1, ["runtime/*.ts"]],
  [0, ["runtime/telemetry/"]],
];

/** code-layout.md "The queue server, from the top": the layers inside runtime/server/. */
const SERVER: Row[] = [
  [12, ["serve.ts", "app.ts"]],
  [11, ["dashboard/"]],
  [10, ["routes/"]],
  [10, ["openapi/"]],
  [9, ["app-deps.ts"]],
  [8, ["metrics/"]],
  [7, ["scaling/"]],
  [6, ["webhooks/"]],
  [5, ["http/"]],
  [4, ["jobs/"]],
  [3, ["limits/", "keys/"]],
  [2, ["store/"]],
  [1, ["files/"]],
];

type Row = [layer: number, paths: string[]];

/** One import: `from` and `to` are paths from the repository root. */
interface Edge {
  from: string;
  to: string;
}

interface Place {
  /** The row's paths, as the table writes them. */
  unit: string;
  layer: number;
}

/** How closely `path` holds `file`: the file itself, else the longer the folder the closer; -1 when it does not. */
function closeness(path: string, file: string): number {
  if (path === file) return Infinity;
  if (path.endsWith("/*.ts")) return `${dirname(file)}/` === path.slice(0, -"*.ts".length) ? path.length : -1;
  return path.endsWith("/") && file.startsWith(path) ? path.length : -1;
}

/** The row of `rows` whose path holds `file` most closely. */
function place(rows: Row[], file: string): Place | undefined {
  let best: (Place & { weight: number }) | undefined;
  for (const [layer, paths] of rows) {
    for (const path of paths) {
      const weight = closeness(path, file);
      if (weight >= 0 && (!best || weight > best.weight)) best = { unit: paths.join(", "), layer, weight };
    }
  }
  return best;
}

const SOURCE = /\.(ts|tsx)$/;

/** What is wrong with one import by the layers, or null when it points down (or stays in its folder). */
function layerProblem({ from, to }: Edge): string | null {
  if (!SOURCE.test(to)) return null; // an asset (TOML, Lua, HTML, JSON) imports nothing
  const a = place(REPOSITORY, from);
  const b = place(REPOSITORY, to);
  if (!a) return `${from}: in no layer of code-layout.md`;
  if (!b) return `${from} -> ${to}: imports a file in no layer of code-layout.md`;
  if (a.unit === b.unit && a.unit === "runtime/server/") return serverProblem(from, to);
  return judge(from, to, a, b);
}

function serverProblem(from: string, to: string): string | null {
  const inner = (f: string) => f.slice("runtime/server/".length);
  const a = place(SERVER, inner(from));
  const b = place(SERVER, inner(to));
  if (!a) return `${from}: in no layer of the queue server's table`;
  if (!b) return `${from} -> ${to}: imports a file in no layer of the queue server's table`;
  return judge(from, to, a, b);
}

function judge(from: string, to: string, a: Place, b: Place): string | null {
  if (a.unit === b.unit || a.layer > b.layer) return null;
  const how = a.layer === b.layer ? "a folder beside it" : "a higher layer";
  return `${from} -> ${to}: ${a.unit} imports ${b.unit}, ${how}`;
}

/** Every loop of files that import each other (Tarjan's strongly connected components), each with its imports. */
function cycles(edges: Edge[]): string[] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const loop = new Set<string>();
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      loop.add(w);
    } while (w !== v);
    if (loop.size === 1 && !next.get(v)?.includes(v)) return;
    const ties = edges.filter((e) => loop.has(e.from) && loop.has(e.to)).map((e) => `${e.from} -> ${e.to}`);
    found.push(`a loop of ${loop.size} files: ${ties.sort().join("; ")}`);
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Every relative import (static, dynamic with a literal, `export ... from`, type-only) of runtime/, sdk/ and handlers/. */
function imports(): Edge[] {
  const files = [...new Glob("{runtime,sdk,handlers}/**/*.{ts,tsx}").scanSync({ cwd: ROOT })].filter((f) => !f.includes("node_modules/"));
  return files.flatMap((from) =>
    ts
      .preProcessFile(readFileSync(join(ROOT, from), "utf8"), true, true)
      .importedFiles.map((i) => i.fileName)
      .filter((spec) => spec.startsWith("."))
      .map((spec) => normalize(join(dirname(from), spec)))
      .filter((to, i, all) => all.indexOf(to) === i) // an import and an export from one file are one tie
      .map((to) => ({ from, to })),
  );
}

/** The rows of the table under `heading` in code-layout.md that have a layer: [layer, the paths in backquotes]. */
function docRows(heading: string): Row[] {
  const doc = readFileSync(join(ROOT, "docs/reference/code-layout.md"), "utf8");
  const section = doc.split(/^## /m).find((s) => s.startsWith(heading));
  if (!section) throw new Error(`code-layout.md has no section "${heading}"`);
  return section
    .split("\n")
    .map((line) => line.split("|").map((c) => c.trim()))
    .filter((cells) => /^\d+$/.test(cells[1] ?? ""))
    .map((cells) => [Number(cells[1]), [...cells[2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)]);
}

describe("code layout", () => {
  test("the layers here are those code-layout.md writes", () => {
    expect(docRows("The repository")).toEqual(REPOSITORY);
    expect(docRows("The queue server")).toEqual(SERVER);
  });

  test("every import of runtime/, sdk/ and handlers/ points down", () => {
    const edges = imports();
    expect(edges.length).toBeGreaterThan(500);
    expect(edges.map(layerProblem).filter((p) => p !== null)).toEqual([]);
  });

  test("no files import each other in a loop", () => {
    expect(cycles(imports())).toEqual([]);
  });

  test("an import up, one across, and a loop are each told", () => {
    expect(layerProblem({ from: "runtime/protocol/limits.ts", to: "runtime/config/config.ts" })).toBe(
      "runtime/protocol/limits.ts -> runtime/config/config.ts: runtime/protocol/ imports runtime/config/, a higher layer",
    );
    expect(layerProblem({ from: "runtime/server/serve.ts", to: "runtime/worker/supervisor.ts" })).toBe(
      "runtime/server/serve.ts -> runtime/worker/supervisor.ts: runtime/server/ imports runtime/worker/, a folder beside it",
    );
    expect(layerProblem({ from: "runtime/server/store/store.ts", to: "runtime/server/jobs/job-view.ts" })).toBe(
      "runtime/server/store/store.ts -> runtime/server/jobs/job-view.ts: store/ imports jobs/, a higher layer",
    );
    expect(layerProblem({ from: "runtime/server/jobs/job-view.ts", to: "runtime/server/store/store.ts" })).toBeNull();
    expect(layerProblem({ from: "runtime/clock.ts", to: "runtime/protocol/limits.ts" })).toBe(
      "runtime/clock.ts -> runtime/protocol/limits.ts: runtime/*.ts imports runtime/protocol/, a folder beside it",
    );
    expect(
      cycles([
        { from: "a.ts", to: "b.ts" },
        { from: "b.ts", to: "a.ts" },
        { from: "b.ts", to: "c.ts" },
      ]),
    ).toEqual(["a loop of 2 files: a.ts -> b.ts; b.ts -> a.ts"]);
  });
});
