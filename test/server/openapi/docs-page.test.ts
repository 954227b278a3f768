import { expect, test } from "bun:test";
import { launchChromium } from "../../helpers/chromium.ts";
import { startTestServer } from "../../helpers/test-server.ts";

test("/docs renders the API reference in Chromium with every request going to the server only", async () => {
  await using srv = await startTestServer();
  await using browser = await launchChromium();
  const page = await browser.newPage();
  const origin = new URL(srv.url).origin;
  const elsewhere: string[] = [];
  const fromServer: string[] = [];
  // Anything not for the server is refused and recorded: the page must work without internet.
  await page.route("**/*", async (route) => {
    const url = route.request().url();
    if (url.startsWith(`${origin}/`)) {
      fromServer.push(new URL(url).pathname);
      await route.continue();
    } else if (url.startsWith("data:") || url.startsWith("blob:")) {
      await route.continue();
    } else {
      elsewhere.push(url);
      await route.abort();
    }
  });
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(String(err)));

  const res = await page.goto(`${srv.url}/docs`);
  expect(res?.status()).toBe(200);
  // The reference is rendered from /openapi.json: operations and the title appear on the page.
  await page.getByText("Queue a job and wait for it").first().waitFor({ timeout: 15_000 });
  // Tags of the document appear in the navigation (operations further down render lazily).
  await page.getByText("Worker protocol").first().waitFor({ timeout: 15_000 });
  expect(await page.title()).toBe("Spool API");
  expect(fromServer).toEqual(expect.arrayContaining(["/docs", "/docs/scalar.js", "/openapi.json"]));
  expect(elsewhere).toEqual([]);
  expect(errors).toEqual([]);
});
