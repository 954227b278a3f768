import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Flags for Debian's Chromium on these machines (infra.md): no sandbox as root, no network of its own. */
const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

let installed: Promise<string> | undefined;

/**
 * The path of a real Chromium: SPOOL_TEST_CHROMIUM (as .ci/run sets it), else /usr/bin/chromium,
 * installed from apt once per test process when missing (as the Redis and S3 helpers do).
 */
export function chromiumPath(): Promise<string> {
  const fromEnv = process.env.SPOOL_TEST_CHROMIUM;
  if (fromEnv && existsSync(fromEnv)) return Promise.resolve(fromEnv);
  installed ??= (async () => {
    const path = "/usr/bin/chromium";
    if (existsSync(path)) return path;
    const install = Bun.spawn(["bash", "-c", "apt-get install -y -q chromium || (apt-get update -q && apt-get install -y -q chromium)"], {
      stdout: "ignore",
      stderr: "pipe",
    });
    const code = await install.exited;
    if (code !== 0 || !existsSync(path)) {
      throw new Error(
        `chromium is missing and apt-get install chromium failed (exit ${code}): ${await new Response(install.stderr).text()}`,
      );
    }
    return path;
  })();
  return installed;
}

/** A headless Chromium driven by playwright-core; close it with `await using`. */
export async function launchChromium(): Promise<Browser & AsyncDisposable> {
  const browser = await chromium.launch({ executablePath: await chromiumPath(), headless: true, args: FLAGS });
  return Object.assign(browser, { [Symbol.asyncDispose]: () => browser.close() });
}
