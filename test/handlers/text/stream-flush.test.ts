import { expect, test } from "bun:test";
import { until } from "../../helpers/until.ts";
import { startTextServer } from "./text-server.ts";

// The time flush end to end (the other text tests close batches by count only): a slow model's
// token goes out streamFlushMs after it is made, through the real worker and server to /stream,
// though its batch is far from full and the job is far from its end.

test("a streamed token reaches /stream by the flush time, before its batch is full and while the job runs", async () => {
  // 100 ms a token (tokenDelayMs) for up to 400 tokens: the job runs for 40 s unless cancelled,
  // and a batch of 1000 never fills, so only the 50 ms flush can send a chunk before the end.
  await using t = await startTextServer({ streamFlushMs: 50, tokenDelayMs: 100 });
  const input = { prompt: "abc", stream: true, min_batch_size: 1000, max_batch_size: 1000, sampling_params: { max_tokens: 400, seed: 1 } };
  const [code, { id }] = await t.srv.json("POST", "/v2/text/run", { input });
  expect(code).toBe(200);
  try {
    const seen = await until(async () => {
      const [, s] = await t.srv.json("GET", `/v2/text/stream/${id}`);
      return s.stream.length > 0 && s;
    }, "a chunk on /stream");
    expect(seen.status).toBe("IN_PROGRESS");
    const [chunk] = seen.stream;
    // Not the last chunk (that one carries the cost), and fewer tokens than a full batch.
    expect(chunk).toEqual({
      output: { input_tokens: expect.any(Number), output_tokens: expect.any(Number), text: expect.any(Array) },
      metrics: expect.objectContaining({ scenario: "stream", stream_index: 0 }),
    });
    expect(chunk.output.output_tokens).toBeGreaterThan(0);
    expect(chunk.output.output_tokens).toBeLessThan(400);
  } finally {
    await t.srv.json("POST", `/v2/text/cancel/${id}`);
    await until(async () => (await t.srv.json("GET", `/v2/text/status/${id}`))[1].status === "CANCELLED", "the job to be cancelled");
  }
});
