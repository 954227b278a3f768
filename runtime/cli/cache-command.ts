import { cacheBase, pruneAll } from "../build/native-cache.ts";

/**
 * `spool cache prune`: removes the native libraries that built binaries extracted into the
 * cache (`<cache>/spool/native-<hash>/`); each binary extracts its own again on its next start.
 */
export function cacheCommand(sub: string | undefined, env: Record<string, string | undefined> = process.env): number {
  if (sub !== "prune") {
    console.error("usage: spool cache prune");
    return 2;
  }
  const { dir } = cacheBase(env);
  const { removed, bytes } = pruneAll(dir);
  for (const path of removed) console.log(`removed ${path}`);
  console.log(`${removed.length} cache entr${removed.length === 1 ? "y" : "ies"} removed from ${dir} (${(bytes / 1e6).toFixed(1)} MB)`);
  return 0;
}
