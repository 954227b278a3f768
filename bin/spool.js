#!/usr/bin/env node
// The `spool` command of the npm package. The CLI is TypeScript for Bun: under Bun (bunx, bun run)
// it is imported here; under Node (npx, npm scripts) it runs in the Bun that this package depends
// on, so a project needs no Bun installed globally.
import { spawn } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const cli = join(dirname(fileURLToPath(import.meta.url)), "..", "runtime", "cli.ts");

if (process.versions.bun) {
  await import(cli);
} else {
  const bun = findBun();
  const child = spawn(bun, [cli, ...process.argv.slice(2)], { stdio: "inherit" });
  // The child gets Ctrl-C from the terminal itself; a signal sent to this process only is passed on.
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
  child.on("error", (err) => {
    console.error(`spool: could not start Bun (${bun}: ${err.message}); the bun package, a dependency of spool, is missing or incomplete: reinstall spool`);
    process.exit(1);
  });
}

/**
 * The Bun executable of the `bun` package: its bin/bun.exe once its install script has linked
 * the binary in, else the platform package it came from (installers that skip install scripts,
 * such as `bun add` for untrusted packages), else a `bun` on PATH.
 */
function findBun() {
  const require = createRequire(import.meta.url);
  let root;
  try {
    root = dirname(require.resolve("bun/package.json"));
  } catch {
    return "bun";
  }
  const linked = join(root, "bin", "bun.exe");
  // Before its install script runs, bin/bun.exe is a small placeholder, not the executable.
  if (existsSync(linked) && statSync(linked).size > 1_000_000) return linked;
  const os = process.platform === "win32" ? "windows" : process.platform;
  const arch = process.arch === "arm64" ? "aarch64" : process.arch;
  const fromBun = createRequire(join(root, "package.json"));
  for (const variant of ["", "-baseline", "-musl", "-musl-baseline"]) {
    try {
      const pkg = dirname(fromBun.resolve(`@oven/bun-${os}-${arch}${variant}/package.json`));
      const exe = join(pkg, "bin", process.platform === "win32" ? "bun.exe" : "bun");
      if (existsSync(exe)) return exe;
    } catch {}
  }
  return "bun";
}
