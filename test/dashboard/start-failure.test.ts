import { expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { launchChromium } from "../helpers/chromium.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";

const FIXTURE = resolve(import.meta.dir, "../fixtures/start-fails-fixture.ts");

test("the endpoint card shows why its workers cannot start, and what happens to its jobs", async () => {
  await using srv = await startTestServer({
    server: { scaleIntervalMs: 20 },
    endpoints: {
      models: { handler: FIXTURE, options: { model: "/nonexistent/missing.onnx" }, startFailureLimit: 1, startFailureWindowMs: 0 },
      waits: { handler: FIXTURE, options: { model: "/nonexistent/weights.onnx" }, onStartFailure: "queue" },
    },
  });
  await srv.call("POST", "/v2/models/run", { input: {} });
  await srv.call("POST", "/v2/waits/run", { input: {} });
  await until(async () => (await srv.json("GET", "/v2/models/health"))[1].lastStartError?.refusing, "the endpoint to fail");
  await until(async () => (await srv.json("GET", "/v2/waits/health"))[1].lastStartError, "a failed start on the waiting endpoint");

  await using browser = await launchChromium();
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${srv.url}/dashboard`);
  await page.getByLabel("API key").fill(srv.key);
  await page.getByRole("button", { name: "Sign in" }).click();

  const failing = page.locator('[data-endpoint="models"] [data-start-error]');
  await failing.waitFor();
  const text = (await failing.textContent()) ?? "";
  expect(text).toContain("Workers cannot start");
  expect(text).toContain("model file /nonexistent/missing.onnx not found (exited with code 1 before it was ready)");
  expect(text).toContain("Queued jobs were failed and new submissions are refused until a worker starts.");
  expect(await page.locator('[data-endpoint="models"] [data-figure="failed"]').textContent()).toBe("1");

  const waiting = page.locator('[data-endpoint="waits"] [data-start-error]');
  await waiting.waitFor();
  expect(await waiting.textContent()).toContain("Jobs stay queued (this endpoint keeps them while workers fail to start).");
  if (process.env.SPOOL_SCREENSHOTS)
    await page.screenshot({ path: join(process.env.SPOOL_SCREENSHOTS, "start-failure.png"), fullPage: true });
}, 60_000);
