import { describe, expect, test } from "bun:test";
import { resolve } from "node:path";
import { retryChaos } from "../../scripts/retry-chaos.ts";
import { redisUrl } from "../helpers/redis-server.ts";

const CLI = resolve(import.meta.dir, "../../runtime/cli.ts");

// Real `spool serve` processes killed with SIGKILL while 16 clients submit; every /run whose
// answer was lost is sent again with its Idempotency-Key. Seeded kill points, a few seconds.
describe("kill -9 with clients that retry with an Idempotency-Key", () => {
  const run = { cli: CLI, jobs: 400, clients: 16, kills: 4, withKey: true };

  test("embedded store: exactly one job per submission", async () => {
    const r = await retryChaos({ ...run, servers: 1, seed: 35 });
    expect({ jobs: r.jobs, kills: r.kills, splitAnswers: r.splitAnswers }).toEqual({ jobs: 400, kills: 4, splitAnswers: 0 });
    expect(r.retries).toBeGreaterThan(0); // answers were lost, and sent again
  }, 60_000);

  test("Redis, two servers, each killed in turn: exactly one job per submission", async () => {
    const r = await retryChaos({ ...run, redis: await redisUrl(), servers: 2, seed: 36 });
    expect({ jobs: r.jobs, kills: r.kills, splitAnswers: r.splitAnswers }).toEqual({ jobs: 400, kills: 4, splitAnswers: 0 });
    expect(r.retries).toBeGreaterThan(0);
  }, 60_000);
});
