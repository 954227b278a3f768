import { expect, test } from "bun:test";
import { z } from "zod";
import { ManualClock } from "../../runtime/clock.ts";
import { defineHandler } from "../../sdk/index.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { until } from "../helpers/until.ts";
import { startLoop } from "../helpers/worker-loop.ts";

test("exitWhenIdleMs counts idleness from the end of the last job, not its start, then the loop ends with 0", async () => {
  const clock = new ManualClock();
  await using srv = await startTestServer({ clock });
  let release!: () => void;
  const w = startLoop(
    srv,
    defineHandler({
      input: z.object({ n: z.number() }),
      handler: async (job) => {
        if (job.input.n === 1) await new Promise<void>((r) => (release = r));
        return job.input.n;
      },
    }),
    { clock, exitWhenIdleMs: 60_000 },
  );
  const status = async (id: string) => (await srv.json("GET", `/v2/echo/status/${id}`))[1];
  const [, first] = await srv.json("POST", "/v2/echo/run", { input: { n: 1 } });
  await until(() => release, "the first job to start");
  // The job runs for longer than the idle time; once it ends the worker is not idle yet.
  clock.advance(120_000);
  release();
  await until(async () => (await status(first.id)).status === "COMPLETED", "the first job to complete");
  const [, second] = await srv.json("POST", "/v2/echo/run", { input: { n: 2 } });
  expect(
    await until(async () => {
      const s = await status(second.id);
      return s.status === "COMPLETED" && s;
    }, "the second job"),
  ).toMatchObject({ output: 2, workerId: w.workerId });

  clock.advance(60_000);
  expect(await w.finished).toBe(0);
  expect(w.exits).toEqual([]);
});
