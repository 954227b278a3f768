import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { launchChromium } from "../helpers/chromium.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../fixtures/log-fixture.ts");

test("the job view shows the job's log lines as they come, in order; the endpoint view its workers' own lines", async () => {
  await using srv = await startTestServer({
    server: { scaleIntervalMs: 20, takeWaitMs: 30_000, stopWaitMs: 30_000 },
    endpoints: { logs: { handler: FIXTURE, workersMax: 1 } },
  });
  const dir = mkdtempSync(join(tmpdir(), "spool-logs-ui-"));
  try {
    const release = join(dir, "release");
    const [, { id }] = await srv.json("POST", "/v2/logs/run", { input: { release } });

    await using browser = await launchChromium();
    const page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
    await page.goto(`${srv.url}/dashboard#/endpoints/logs/jobs/${id}`);
    await page.getByLabel("API key").fill(srv.key);
    await page.getByRole("button", { name: "Sign in" }).click();

    const messages = page.locator('[data-testid="job-logs"] .log-message');
    // Live: the five lines are there while the job still runs (the fixture holds it).
    await until(async () => (await messages.count()) >= 5, "the first five lines on the page", 30_000);
    expect(await page.getByTestId("job-status").textContent()).toBe("IN_PROGRESS");
    expect(await messages.allTextContents()).toEqual([
      "console.log line 1",
      'ctx.log line {"step":2}',
      "stdout line 3",
      "console.error line 4",
      "stderr line 5",
    ]);
    writeFileSync(release, "");
    await until(async () => (await page.getByTestId("job-status").textContent()) === "COMPLETED", "the job to complete on the page");
    await until(async () => (await messages.count()) === 6, "the last line");
    expect(await messages.last().textContent()).toBe("released");
    if (process.env.SPOOL_SCREENSHOTS) await page.screenshot({ path: join(process.env.SPOOL_SCREENSHOTS, "job-logs.png"), fullPage: true });

    // The endpoint view: the worker's start, from the scaler, and its own log lines (its error output).
    await page.goto(`${srv.url}/dashboard#/endpoints/logs`);
    const workerLines = page.locator('[data-testid="worker-log"] .log-message');
    await until(async () => (await workerLines.allTextContents()).includes("started"), "the worker's start on the endpoint view");
    await until(async () => (await workerLines.allTextContents()).some((l) => l.includes("worker ready")), "the worker's own ready line");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);
