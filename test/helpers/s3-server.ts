import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { S3Config } from "../../runtime/protocol/job-request.ts";

const SCRIPT = resolve(import.meta.dir, "../../scripts/s3-server.sh");
const VARS = {
  endpointUrl: "SPOOL_TEST_S3_ENDPOINT",
  accessId: "SPOOL_TEST_S3_ACCESS_ID",
  accessSecret: "SPOOL_TEST_S3_SECRET",
  bucketName: "SPOOL_TEST_S3_BUCKET",
} as const;

let started: Promise<S3Config> | undefined;

/**
 * A real S3-compatible server (Ceph radosgw) for tests: the one named by SPOOL_TEST_S3_* (as
 * .ci/run starts it), or else one started by scripts/s3-server.sh once per test process and
 * stopped after the process exits. Never skips: a failed start is a failed test.
 */
export async function s3FromEnv(env: Record<string, string | undefined> = process.env): Promise<S3Config> {
  const config = fromVars(env);
  if (config) return config;
  started ??= startServer();
  return started;
}

/** The config the variables name; null when none is set. */
function fromVars(env: Record<string, string | undefined>): S3Config | null {
  const values = Object.entries(VARS).map(([field, name]) => [field, env[name]] as const);
  const missing = values.filter(([, v]) => !v).map(([field]) => VARS[field as keyof typeof VARS]);
  if (missing.length === values.length) return null;
  if (missing.length > 0) throw new Error(`S3 test settings are incomplete: ${missing.join(", ")} unset (set all four, or none)`);
  return Object.fromEntries(values) as S3Config;
}

async function startServer(): Promise<S3Config> {
  const dir = mkdtempSync(join(tmpdir(), "spool-s3-"));
  // bun test emits no process "exit" event, so a detached watchdog stops the server once this
  // process has ended, however it ends (and also after a start that died half-way).
  const watchdog = Bun.spawn(
    ["setsid", "bash", "-c", 'tail --pid="$1" -f /dev/null; exec bash "$2" stop "$3"', "s3-watchdog", String(process.pid), SCRIPT, dir],
    { stdin: "ignore", stdout: "ignore", stderr: "ignore" },
  );
  watchdog.unref();
  const proc = Bun.spawn(["bash", SCRIPT, "start", dir], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`scripts/s3-server.sh start failed (exit ${code}):\n${err.slice(-4000)}`);
  const exported: Record<string, string> = {};
  for (const m of out.matchAll(/^export (\w+)=(.*)$/gm)) exported[m[1]!] = m[2]!;
  const config = fromVars(exported);
  if (!config) throw new Error(`scripts/s3-server.sh start printed no settings:\n${out}`);
  return config;
}
