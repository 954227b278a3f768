import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { createKey } from "../../runtime/server/keys/api-keys.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { until } from "../helpers/until.ts";
import { startDashboardServer, type DashboardServer } from "./dashboard-server.ts";

// Screenshots of each step go here when set (look at them while working on the page).
const SHOTS = process.env.SPOOL_SCREENSHOTS;
if (SHOTS) mkdirSync(SHOTS, { recursive: true });
const shot = async (page: Page, name: string) => {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
};

/** Evaluates an expression in the page (the tests' own types have no DOM). */
const inPage = <T = unknown>(page: Page, expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;

/**
 * Waits until the element's text is `expected` (the page updates from its own requests and
 * events, which a loaded machine delays), then asserts it: a text that never comes fails with
 * the text shown.
 */
async function textBecomes(locator: Locator, expected: string | RegExp): Promise<void> {
  const matches = (text: string | null) => text !== null && (typeof expected === "string" ? text === expected : expected.test(text));
  await until(async () => matches(await locator.textContent()), `${locator} to show ${expected}`).catch(() => {});
  const shown = await locator.textContent();
  if (typeof expected === "string") expect(shown).toBe(expected);
  else expect(shown).toMatch(expected);
}

/** Script errors and Content-Security-Policy violations of every signed-in page: there must be none. */
const pageErrors: string[] = [];

let env: DashboardServer;
let browser: Browser & AsyncDisposable;
beforeAll(async () => {
  env = await startDashboardServer();
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  expect(pageErrors).toEqual([]);
  await browser?.close();
  await env?.[Symbol.asyncDispose]();
});

/** A fresh tab (its own session storage) signed in with `key`, on the overview. */
async function signedIn(key: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  page.on("console", (m) => void (/Content.Security.Policy/i.test(m.text()) && pageErrors.push(m.text())));
  await page.goto(`${env.srv.url}/dashboard`);
  // By keyboard alone: the key field is the first stop, Enter signs in.
  await page.keyboard.press("Tab");
  await page.keyboard.type(key);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Endpoints" }).waitFor();
  return page;
}

describe("dashboard in a real browser", () => {
  test("a wrong key is refused and nothing is kept", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${env.srv.url}/dashboard`);
    await page.getByLabel("API key").fill("spool_not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("alert").textContent()).resolves.toContain("invalid or revoked API key");
    expect(await inPage(page, "({ ...sessionStorage })")).toEqual({});
    await shot(page, "sign-in-refused");
    await context.close();
  });

  test("sign in: every endpoint with its queue and workers; the key only in session storage", async () => {
    const page = await signedIn(env.srv.key);
    for (const ep of ["echo", "slow", "gated", "image-fast", "text"]) {
      await page.getByRole("region", { name: ep }).waitFor();
    }
    await page.locator('[data-endpoint="echo"] [data-figure="inQueue"]').filter({ hasText: /^\d+$/ }).waitFor();
    expect(await inPage(page, "({ ...sessionStorage })")).toEqual({ "spool-api-key": env.srv.key });
    expect(await inPage(page, "document.cookie")).toBe("");
    expect(page.url()).not.toContain(env.srv.key);
    await shot(page, "overview");
    await page.context().close();
  });

  test("a submitted job appears in the list and completes without reloading", async () => {
    const page = await signedIn(env.srv.key);
    await page.getByRole("link", { name: "echo", exact: true }).first().click();
    await page.getByRole("heading", { name: /echo\s+jobs/ }).waitFor();
    await inPage(page, "window.__sameDocument = true");
    const [, { id }] = await env.srv.json("POST", "/v2/echo/run", { input: { hello: "dashboard" } });
    const row = page.locator(`tr[data-job="${id}"]`);
    await row.locator('[data-status="COMPLETED"]').waitFor();
    expect(await inPage(page, "window.__sameDocument")).toBe(true);
    await shot(page, "jobs");
    // The job's detail: input, output, times and worker.
    await row.getByRole("link", { name: id }).click();
    await page.getByTestId("job-status").filter({ hasText: "COMPLETED" }).waitFor();
    // The status comes over SSE, the detail (input) by its own request: wait for both to show.
    const hello = page.locator("pre").filter({ hasText: '"hello": "dashboard"' });
    await hello.nth(1).waitFor();
    await expect(hello.count()).resolves.toBe(2); // input and output
    await shot(page, "job-detail");
    await page.context().close();
  });

  test("image-fast from the playground: the image is shown at the asked size", async () => {
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/image-fast/playground`);
    await page.getByLabel("prompt", { exact: true }).fill("a red cat");
    await page.getByLabel("width", { exact: true }).fill("320");
    await page.getByLabel("height", { exact: true }).fill("256");
    await page.getByLabel("num_inference_steps", { exact: true }).fill("2");
    await page.getByLabel("image_format", { exact: true }).selectOption("png");
    // Ranges and defaults from the handler's schema are shown beside the fields.
    await expect(page.locator("#pg-width-hint").textContent()).resolves.toBe("256–1536, a multiple of 64, default 1024");
    await page.getByRole("button", { name: "Run" }).click();
    const img = page.getByTestId("output-image");
    await img.waitFor();
    await page.waitForFunction(
      'document.querySelector("[data-testid=output-image]")?.complete && document.querySelector("[data-testid=output-image]").naturalWidth > 0',
    );
    expect(await img.evaluate((el: any) => [el.naturalWidth, el.naturalHeight])).toEqual([320, 256]);
    await textBecomes(page.getByTestId("run-status"), "COMPLETED");
    await textBecomes(page.getByTestId("run-cost"), "$0.000196608"); // 320*256/1e6 * 0.0024
    await shot(page, "playground-image");
    await page.context().close();
  });

  test("streamed text arrives chunk by chunk", async () => {
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/gated/playground`);
    await page.getByLabel("Input JSON").fill(JSON.stringify({ text: "one two three" }));
    await page.getByRole("button", { name: "Run" }).click();
    const text = page.getByTestId("output-text");
    env.gate.release();
    await text.filter({ hasText: /^one\s*▍?$/ }).waitFor();
    await page.getByTestId("run-status").filter({ hasText: "IN_PROGRESS" }).waitFor();
    env.gate.release();
    await text.filter({ hasText: /^one two\s*▍?$/ }).waitFor();
    await shot(page, "playground-streaming");
    env.gate.release();
    await page.getByTestId("run-status").filter({ hasText: "COMPLETED" }).waitFor();
    await textBecomes(text, "one two three ");
    await page.context().close();
  });

  test("text from the playground on the real text handler: tokens, cost and timings", async () => {
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/text/playground`);
    // The JSON editor starts with the handler's example (stream: true).
    const example = JSON.parse(await page.getByLabel("Input JSON").inputValue());
    expect(example).toMatchObject({ stream: true, messages: [{ role: "user" }] });
    await page.getByLabel("Input JSON").fill(JSON.stringify({ ...example, sampling_params: { max_tokens: 24, seed: 1 } }));
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByTestId("run-status").filter({ hasText: "COMPLETED" }).waitFor({ timeout: 60_000 });
    const id = (await page.locator(".run-result a.mono").textContent())!;
    const [, job] = await env.srv.json("GET", `/dashboard/api/endpoints/text/jobs/${id}`);
    const tokens = job.stream.flatMap((c: any) => c.output.text).join("");
    expect(tokens.length).toBeGreaterThan(0);
    await textBecomes(page.getByTestId("output-text"), tokens);
    await textBecomes(page.getByTestId("run-cost"), /^\$0\.0000\d+$/);
    await textBecomes(page.getByTestId("run-execution"), /ms|s$/);
    await shot(page, "playground-text");
    await page.context().close();
  }, 90_000);

  test("retry a failed job from its detail: the page follows the new run live", async () => {
    // gated's worker checks its input: without `text` the job fails.
    const [, { id }] = await env.srv.json("POST", "/v2/gated/run", { input: {} });
    await until(async () => (await env.srv.json("GET", `/v2/gated/status/${id}`))[1].status === "FAILED", "the job to fail");
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/gated/jobs/${id}`);
    await page.getByTestId("job-status").filter({ hasText: "FAILED" }).waitFor();
    await page
      .getByTestId("retries")
      .filter({ hasText: /^0 \/ 0$/ })
      .waitFor();
    await page.getByRole("button", { name: "Retry" }).click();
    // The retried run fails again; the page shows it as the job's second run, without a reload.
    await page
      .getByTestId("retries")
      .filter({ hasText: /^1 \/ 0$/ })
      .waitFor();
    await page.getByTestId("job-status").filter({ hasText: "FAILED" }).waitFor();
    expect((await env.srv.json("GET", `/v2/gated/status/${id}`))[1].status).toBe("FAILED");
    await page.context().close();
  });

  test("cancel a running slow job", async () => {
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/slow/playground`);
    await page.getByLabel("ms", { exact: true }).fill("600000");
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByTestId("run-status").filter({ hasText: "IN_PROGRESS" }).waitFor();
    const id = (await page.locator(".run-result a.mono").textContent())!;
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByTestId("run-status").filter({ hasText: "CANCELLED" }).waitFor();
    expect((await env.srv.json("GET", `/v2/slow/status/${id}`))[1].status).toBe("CANCELLED");
    await page.context().close();
  });

  test("a read-only key sees everything and has no enabled action", async () => {
    const [, { id }] = await env.srv.json("POST", "/v2/slow/run", { input: { ms: 600_000 } });
    await until(async () => (await env.srv.json("GET", `/v2/slow/status/${id}`))[1].status === "IN_PROGRESS", "the slow job to run");
    const page = await signedIn(env.readOnlyKey);
    await page.getByRole("region", { name: "slow" }).waitFor();
    await page.goto(`${env.srv.url}/dashboard#/endpoints/slow`);
    await page.locator(`tr[data-job="${id}"]`).waitFor();
    await page.goto(`${env.srv.url}/dashboard#/endpoints/slow/jobs/${id}`);
    await page.getByTestId("job-status").filter({ hasText: "IN_PROGRESS" }).waitFor();
    const input = page.locator("pre").filter({ hasText: '"ms": 600000' });
    await input.waitFor(); // the detail arrives by its own request, after or before the SSE status
    await expect(input.count()).resolves.toBe(1);
    const actions = page.getByRole("button", { name: /^(Cancel|Retry|Purge queue|Run)$/ });
    for (const path of ["", "#/endpoints/slow", `#/endpoints/slow/jobs/${id}`, "#/endpoints/slow/playground"]) {
      await page.goto(`${env.srv.url}/dashboard${path}`);
      await page.locator("main h1").waitFor();
      await actions.first().waitFor();
      const states = await actions.evaluateAll((els: any[]) => els.map((el) => el.disabled as boolean));
      expect(states.length).toBeGreaterThan(0);
      expect(states.every(Boolean)).toBe(true);
    }
    await shot(page, "read-only");
    await env.srv.json("POST", `/v2/slow/cancel/${id}`);
    await page.context().close();
  });

  test("the job list filters by status and pages", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 22; i++) ids.push((await env.srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
    await until(
      async () => (await env.srv.json("GET", `/v2/echo/status/${ids.at(-1)}`))[1].status === "COMPLETED",
      "the echo jobs to complete",
    );
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/echo`);
    await page.getByLabel("Status").selectOption("COMPLETED");
    await page.locator(`tr[data-job="${ids.at(-1)}"]`).waitFor();
    const rows = page.locator("tbody tr");
    expect(await rows.count()).toBe(20);
    await page.getByRole("button", { name: "Older" }).click();
    await page.getByText("page 2").waitFor();
    await page.locator(`tr[data-job="${ids[1]}"]`).waitFor();
    expect(
      await page.locator("tbody [data-status]").evaluateAll((els: any[]) => els.every((el) => el.dataset.status === "COMPLETED")),
    ).toBe(true);
    // Cancelled jobs of slow (from the tests above) and nothing else.
    await page.goto(`${env.srv.url}/dashboard#/endpoints/slow`);
    await page.getByLabel("Status").selectOption("CANCELLED");
    await page.getByText("page 1").waitFor();
    await page.locator('tbody [data-status="CANCELLED"]').first().waitFor();
    const shown = await page.locator("tbody [data-status]").evaluateAll((els: any[]) => els.map((el) => el.dataset.status as string));
    expect(shown.length).toBeGreaterThan(0);
    expect(new Set(shown)).toEqual(new Set(["CANCELLED"]));
    await page.context().close();
  });

  test("purge from the page removes the queued jobs, not the running one", async () => {
    const [, running] = await env.srv.json("POST", "/v2/gated/run", { input: { text: "held" } });
    await until(
      async () => (await env.srv.json("GET", `/v2/gated/status/${running.id}`))[1].status === "IN_PROGRESS",
      "the gated job to run",
    );
    const queued: string[] = [];
    for (let i = 0; i < 2; i++) queued.push((await env.srv.json("POST", "/v2/gated/run", { input: { text: `queued ${i}` } }))[1].id);
    const page = await signedIn(env.srv.key);
    await page.goto(`${env.srv.url}/dashboard#/endpoints/gated`);
    for (const id of queued) await page.locator(`tr[data-job="${id}"]`).waitFor();
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Purge queue" }).click();
    await page.getByRole("status").filter({ hasText: "removed 2" }).waitFor();
    // The purged jobs leave the list; the running one stays.
    for (const id of queued) await page.locator(`tr[data-job="${id}"]`).waitFor({ state: "detached" });
    await page.locator(`tr[data-job="${running.id}"]`).waitFor();
    expect((await env.srv.json("GET", "/v2/gated/health"))[1].jobs).toMatchObject({ inQueue: 0, inProgress: 1 });
    env.gate.release();
    await until(
      async () => (await env.srv.json("GET", `/v2/gated/status/${running.id}`))[1].status === "COMPLETED",
      "the held job to complete",
    );
    await page.context().close();
  });

  test("the overview counts the jobs run above (the README's screenshot)", async () => {
    const page = await signedIn(env.srv.key);
    const completed = page.locator('[data-endpoint="image-fast"] [data-figure="completed"]');
    await completed.filter({ hasText: /^[1-9]\d*$/ }).waitFor();
    const [, health] = await env.srv.json("GET", "/v2/image-fast/health");
    await textBecomes(completed, String(health.jobs.completed));
    await shot(page, "dashboard");
    await page.context().close();
  });

  test("a key revoked while the page is open signs the page out", async () => {
    const { key } = await createKey(env.srv.store, "short-lived", env.srv.clock.now(), { scope: "read-only" });
    const page = await signedIn(key);
    await env.srv.store.revokeKey("short-lived", env.srv.clock.now());
    await page.goto(`${env.srv.url}/dashboard#/endpoints/echo`);
    await page.getByRole("alert").filter({ hasText: "no longer valid" }).waitFor();
    await page.getByLabel("API key").waitFor();
    expect(await inPage(page, "({ ...sessionStorage })")).toEqual({});
    await page.context().close();
  });

  test("an endpoint-restricted key sees only its endpoints", async () => {
    const page = await signedIn(env.echoKey);
    await page.getByRole("region", { name: "echo" }).waitFor();
    expect(await page.getByRole("region").count()).toBe(1);
    await page.context().close();
  });
});
