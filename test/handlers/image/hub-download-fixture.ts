import { downloadFromHub } from "../../../handlers/image/hub-download.ts";

/** One process downloading a hub model: `bun hub-download-fixture.ts ID DIR ENDPOINT`; prints "ok" or the error. */
const [id, dir, endpoint] = process.argv.slice(2) as [string, string, string];
try {
  await downloadFromHub(id, dir, { env: { HF_ENDPOINT: endpoint }, out: process.stderr });
  console.log("ok");
} catch (err) {
  console.log(`error: ${(err as Error).message}`);
}
