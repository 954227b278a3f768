import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { anchor, anchors, docFiles, links, ROOT } from "./markdown.ts";

const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** What is wrong with a relative link from `from`, or null when it resolves. */
function broken(from: string, target: string): string | null {
  const [path, fragment] = target.split("#", 2) as [string, string | undefined];
  const file = path ? join(dirname(join(ROOT, from)), decodeURIComponent(path)) : join(ROOT, from);
  if (!existsSync(file)) return `${target}: no file ${relative(ROOT, file)}`;
  if (fragment && file.endsWith(".md") && statSync(file).isFile() && !anchors(readFileSync(file, "utf8")).has(fragment)) {
    return `${target}: no heading #${fragment} in ${relative(ROOT, file)}`;
  }
  return null;
}

describe("docs links", () => {
  test("the README and the docs pages link to one another", () => {
    const files = docFiles();
    expect(files).toContain("docs/getting-started.md");
    expect(files).toContain("docs/benchmarks.md");
  });

  for (const file of docFiles()) {
    test(`every relative link in ${file} resolves`, () => {
      const problems = links(read(file))
        .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t))
        .map((t) => broken(file, t))
        .filter((p) => p !== null);
      expect(problems).toEqual([]);
    });
  }

  test("a heading's anchor is GitHub's", () => {
    expect(anchor("Several servers on Redis")).toBe("several-servers-on-redis");
    expect(anchor("Machine-readable: /openapi.json and /docs")).toBe("machine-readable-openapijson-and-docs");
  });

  test("a link to a missing file or heading is reported", () => {
    expect(broken("README.md", "docs/no-such-page.md")).toContain("no file docs/no-such-page.md");
    expect(broken("README.md", "docs/benchmarks.md#no-such-heading")).toContain("no heading #no-such-heading");
    expect(broken("README.md", "docs/benchmarks.md#soak")).toBeNull();
  });
});
