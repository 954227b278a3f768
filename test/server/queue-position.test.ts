import { expect, test } from "bun:test";
import { protocolWorker } from "../helpers/protocol-worker.ts";
import { startTestServer } from "../helpers/test-server.ts";

test("/status of a queued job carries queuePosition (0 = next); taken and finished jobs carry none", async () => {
  await using srv = await startTestServer({ endpoints: { echo: {}, other: {} } });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await srv.json("POST", "/v2/echo/run", { input: { i } }))[1].id);
  await srv.json("POST", "/v2/other/run", { input: {} });
  const status = async (id: string) => (await srv.json("GET", `/v2/echo/status/${id}`))[1];
  expect(await status(ids[2]!)).toEqual({ id: ids[2], status: "IN_QUEUE", queuePosition: 2 });
  await protocolWorker(srv, "echo", "w1").take();
  await srv.json("POST", `/v2/echo/cancel/${ids[1]}`);
  expect(await status(ids[2]!)).toEqual({ id: ids[2], status: "IN_QUEUE", queuePosition: 0 });
  expect(await status(ids[0]!)).toEqual({ id: ids[0], status: "IN_PROGRESS", delayTime: expect.any(Number), workerId: "w1" });
});
