/**
 * `const req = createRequire(import.meta.url)` makes requires the bundler cannot see. Calls
 * with a literal name the build can bundle (`bundles`: it resolves from the file, or it is the
 * target's platform package, fetched) become plain `require("name")`; every other use keeps a
 * renamed runtime require.
 */
export function bundleCreatedRequires(source: string, bundles: (spec: string) => boolean): string {
  const decl = /\b(const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*((?:[\w$]+\.)?createRequire\s*\()/g;
  const names = [...source.matchAll(decl)].map((m) => m[2]!);
  if (names.length === 0) return source;
  let out = source.replace(decl, (_m, kind: string, name: string, call: string) => `${kind} __spoolRuntime_${name} = ${call}`);
  for (const name of new Set(names)) {
    const use = new RegExp(`(?<![\\w$.'"\`])${name.replace(/\$/g, "\\$")}(?![\\w$])(\\s*\\(\\s*(["'])([^"'\`\\n]+)\\2\\s*\\))?`, "g");
    out = out.replace(use, (whole, call: string | undefined, _q, spec: string | undefined) => {
      if (call && spec && bundles(spec)) return `require(${JSON.stringify(spec)})`;
      return whole.replace(name, `__spoolRuntime_${name}`);
    });
  }
  return out;
}

const GUARD = "__spoolBundledOnly";

/**
 * A compiled binary resolves a runtime `require(name)` from the node_modules of its working
 * directory, so a package probing for an optional one (protobufjs's `inquire("long")`) would
 * load whatever version a project beside it has. Requires with a computed name that is a bare
 * package name fail as "not installed" instead, as they would with nothing on disk; builtins,
 * paths and literal names (bundled) are untouched.
 */
export function guardDynamicRequires(source: string): string {
  const dynamic = /(?<![\w$.'"`])require\((?!\s*["'`])/g;
  if (!dynamic.test(source)) return source;
  // A function declaration at the end: hoisted, and a leading "use strict" stays the first statement.
  const guard =
    `\nfunction ${GUARD}(n) { if (typeof n === "string" && !n.startsWith(".") && !n.startsWith("/") && !require("node:module").isBuiltin(n)) ` +
    `throw Object.assign(new Error("Cannot find module '" + n + "': it is not bundled into this binary"), { code: "MODULE_NOT_FOUND" }); return require(n); }\n`;
  return source.replace(dynamic, `${GUARD}(`) + guard;
}
