/**
 * A text/event-stream response whose text `produce` writes until it returns; the stream then
 * closes (a thrown error ends it with that error). `release` runs once the stream ends, however
 * it ends; a client going away aborts `signal` and calls `onCancel`.
 */
export function eventStreamResponse(
  produce: (write: (text: string) => void, signal: AbortSignal) => Promise<void>,
  options: { release?: () => void | Promise<void>; onCancel?: () => void; headers?: Record<string, string> } = {},
): Response {
  const encoder = new TextEncoder();
  const gone = new AbortController();
  const release = options.release ?? (() => {});
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        await produce((text) => controller.enqueue(encoder.encode(text)), gone.signal);
        if (!gone.signal.aborted) controller.close();
      } catch (err) {
        if (!gone.signal.aborted) controller.error(err);
      } finally {
        await release();
      }
    },
    cancel() {
      gone.abort();
      options.onCancel?.();
      void release();
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      ...options.headers,
    },
  });
}
