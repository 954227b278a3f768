import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureBubblewrap, SANDBOXES } from "../../helpers/sandbox.ts";
import { startTestServer } from "../../helpers/test-server.ts";

const SPY = resolve(import.meta.dir, "../../fixtures/spy-fixture.ts");
const HOLD = resolve(import.meta.dir, "../../fixtures/hold-fixture.ts");
const SECRET = "SPOOL_TRUST_TEST_CLOUD_KEY";
const configDir = mkdtempSync(join(tmpdir(), "spool-trust-"));
const configFile = join(configDir, "spool.toml");
writeFileSync(configFile, '[server]\nstore = "redis://:hunter2@redis.internal:6379"\n');

beforeAll(async () => {
  await ensureBubblewrap();
  // A secret in the server's environment, as a cloud key or a Redis password would be.
  process.env[SECRET] = "s3cr3t";
});
afterAll(() => {
  delete process.env[SECRET];
  rmSync(configDir, { recursive: true, force: true });
});

for (const sandbox of SANDBOXES) {
  describe(`one endpoint's handler against another's work and the server's secrets (sandbox: ${sandbox})`, () => {
    test("its worker key takes nothing of another endpoint or worker and works on no client route (holds without bubblewrap); it gets no server secret from its environment (holds without bubblewrap)", async () => {
      await using srv = await startTestServer({
        configFile,
        server: { sandbox, takeWaitMs: 0 },
        endpoints: {
          spy: { handler: SPY, workersMax: 1 },
          // The victim's handler is never started: its jobs wait in its queue.
          victim: { handler: HOLD, workersMax: 0 },
        },
      });
      const queued = [
        (await srv.json("POST", "/v2/victim/run", { input: { hold: true } }))[1].id,
        (await srv.json("POST", "/v2/victim/run", { input: { hold: true } }))[1].id,
      ];
      const [, spied] = await srv.json("POST", "/v2/spy/runsync", {
        input: { server: srv.url, victim: "victim", configFile, secretName: SECRET },
      });
      expect(spied.status).toBe("COMPLETED");
      const seen = spied.output;
      // Another endpoint's queue: the key is limited to the spy's own endpoint.
      expect([seen.victimTake, seen.victimTakeBatch, seen.victimStatus]).toEqual([401, 401, 401]);
      // Its own endpoint, as another worker: the key acts for its own worker alone.
      expect(seen.ownEndpointOtherWorker).toBe(404);
      // A client route: a worker key is not a client key.
      expect(seen.clientRun).toBe(401);
      // Nothing was taken.
      for (const id of queued) expect((await srv.json("GET", `/v2/victim/status/${id}`))[1].status).toBe("IN_QUEUE");
      // The server's environment did not reach the worker.
      expect(seen.secret).toBeNull();

      if (sandbox === "bubblewrap") {
        // Only with bubblewrap: the data dir shows only the endpoints' folders, the config file
        // cannot be read, nothing can be written there, and no process of the server is visible.
        expect(seen.dataDirEntries).toEqual(["endpoints"]);
        expect(seen.database).toBe(false);
        expect(String(seen.configFile)).toStartWith("refused");
        expect(String(seen.dataDirWritable)).toStartWith("refused");
        expect(seen.serverEnviron).toBe(false);
      } else {
        // Without it the handler runs with the server's rights: it sees the data dir and the config.
        expect(seen.dataDirEntries).toContain("spool.db");
        expect(seen.configFile).toContain("hunter2");
      }
    }, 60_000);
  });
}

test("with bubblewrap, a data dir reached through a symlink is hidden all the same, and its workers start", async () => {
  const root = mkdtempSync(join(tmpdir(), "spool-trust-link-"));
  try {
    const real = join(root, "real");
    mkdirSync(real);
    writeFileSync(join(real, "webhook-secret"), "whsec_...");
    symlinkSync(real, join(root, "data"));
    await using srv = await startTestServer({
      configFile,
      server: { sandbox: "bubblewrap", data: join(root, "data") },
      endpoints: { spy: { handler: SPY, workersMax: 1 } },
    });
    const [, spied] = await srv.json("POST", "/v2/spy/runsync", {
      input: { server: srv.url, victim: "victim", configFile, secretName: SECRET },
    });
    expect(spied.status).toBe("COMPLETED");
    expect(spied.output.dataDirEntries).toEqual(["endpoints"]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}, 60_000);
