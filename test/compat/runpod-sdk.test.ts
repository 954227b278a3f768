import { expect, test } from "bun:test";
import runpodSdk from "runpod-sdk";
import streamHandler from "../../handlers/examples/stream.ts";
import { startTestServer } from "../helpers/test-server.ts";
import { startLoop } from "../helpers/worker-loop.ts";

// RunPod's own JS client (runpod-sdk on npm), unchanged, against a real Spool server and worker.
test("runpod-sdk: runSync, run, status, stream, cancel, health and purgeQueue work unchanged", async () => {
  await using srv = await startTestServer({
    server: { takeWaitMs: 30_000, stopWaitMs: 30_000, streamWaitMs: 30_000 },
    endpoints: { words: {}, idle: {} },
  });
  await using _worker = startLoop(srv, streamHandler, { endpoint: "words" });
  const sdk = runpodSdk(srv.key, { baseUrl: `${srv.url}/v2` });
  const words = sdk.endpoint("words")!;

  const sync = await words.runSync({ input: { text: "one two three" } });
  expect(sync).toMatchObject({ id: expect.stringMatching(/^sync-/), status: "COMPLETED", output: ["one", "two", "three"] });

  const queued = await words.run({ input: { text: "a b c d" } });
  const id = queued.id;
  expect([typeof id, queued.status]).toEqual(["string", "IN_QUEUE"]);
  const streamed: unknown[] = [];
  for await (const chunk of words.stream(id)) streamed.push(chunk.output);
  expect(streamed).toEqual(["a", "b", "c", "d"]);
  expect(await words.status(id)).toMatchObject({ id, status: "COMPLETED", output: ["a", "b", "c", "d"] });
  expect((await words.health()).jobs).toMatchObject({ completed: 2, inQueue: 0 });

  const idle = sdk.endpoint("idle")!;
  const waitingId = (await idle.run({ input: {} })).id;
  await idle.run({ input: {} });
  expect(await idle.cancel(waitingId)).toMatchObject({ id: waitingId, status: "CANCELLED" });
  expect(await idle.purgeQueue()).toMatchObject({ removed: 1, status: "completed" });
});
