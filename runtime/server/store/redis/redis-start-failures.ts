import type { StartFailureRun } from "../store.ts";

/**
 * Every endpoint's run of failed starts from the hash startfail, where each run is four fields
 * (<ep>:n, <ep>:first, <ep>:perm, <ep>:last; see the startFailed script).
 */
export function runsFromHash(h: Record<string, string>): Record<string, StartFailureRun> {
  const runs: Record<string, StartFailureRun> = {};
  for (const [field, value] of Object.entries(h)) {
    if (!field.endsWith(":last")) continue;
    const ep = field.slice(0, -":last".length);
    runs[ep] = {
      attempts: Number(h[`${ep}:n`] ?? 1),
      firstAt: Number(h[`${ep}:first`]),
      permanent: h[`${ep}:perm`] === "1",
      last: JSON.parse(value),
    };
  }
  return runs;
}
