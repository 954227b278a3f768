import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * Refreshes the vendored files under vendor/ from the installed devDependencies, after upgrading
 * one of them: `npx bun scripts/refresh-vendor.ts`. Each is kept in the repository (and the npm
 * package) because the package it comes from brings far more than the one file the server serves.
 */
const ROOT = join(import.meta.dir, "..");

/** Each vendored file: the package file it is a copy of, and where it is kept. */
const VENDORED = [
  // Scalar's browser bundle (MIT), served at /docs/scalar.js; @scalar/api-reference also brings
  // Vue and the rest of its editor, ~200 MB.
  { from: "@scalar/api-reference/browser/standalone.js", to: "vendor/scalar/standalone.js" },
];

/** The package.json of the package that holds `file`. */
function packageOf(file: string): string {
  let dir = dirname(file);
  while (!existsSync(join(dir, "package.json"))) dir = dirname(dir);
  return join(dir, "package.json");
}

for (const { from, to } of VENDORED) {
  const source = Bun.resolveSync(from, ROOT);
  const pkg = (await Bun.file(packageOf(source)).json()) as { name: string; version: string };
  await Bun.write(join(ROOT, to), Bun.file(source));
  console.log(`${to}: ${from} of ${pkg.name} ${pkg.version}`);
}
