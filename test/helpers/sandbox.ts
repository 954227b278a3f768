import { aptInstall } from "./apt-install.ts";

let installed: Promise<void> | undefined;

/**
 * bubblewrap, installed from apt once per test process when bwrap is missing (as redis-server
 * is), so the sandbox's tests run on a fresh machine too.
 */
export function ensureBubblewrap(): Promise<void> {
  installed ??= Bun.which("bwrap") ? Promise.resolve() : aptInstall(["bubblewrap"]);
  return installed;
}

/** The two ways the server can start its workers: each test about containment runs under both. */
export const SANDBOXES = ["bubblewrap", "none"] as const;
