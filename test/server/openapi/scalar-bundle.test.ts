import { expect, test } from "bun:test";
import { startTestServer } from "../../helpers/test-server.ts";

test("/docs/scalar.js is the bundle of the @scalar/api-reference version installed here", async () => {
  await using srv = await startTestServer();
  const res = await fetch(`${srv.url}/docs/scalar.js`);
  expect(res.status).toBe(200);
  const served = await res.text();
  const installed = await Bun.file(Bun.resolveSync("@scalar/api-reference/browser/standalone.js", import.meta.dir)).text();
  // After upgrading @scalar/api-reference: npx bun scripts/refresh-vendor.ts
  expect(served.length).toBe(installed.length);
  expect(served === installed).toBe(true);
});
