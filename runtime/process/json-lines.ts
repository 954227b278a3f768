/** Feeds each JSON line of `input` to `onMessage` until the stream ends; other lines are skipped. */
export async function readJsonLines(input: ReadableStream<Uint8Array>, onMessage: (m: unknown) => void): Promise<void> {
  let buf = "";
  const decoder = new TextDecoder();
  try {
    for await (const bytes of input) {
      buf += decoder.decode(bytes, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const line of lines) {
        let message: unknown;
        try {
          message = JSON.parse(line);
        } catch {
          continue; // not a message
        }
        onMessage(message);
      }
    }
  } catch {
    // the other side is gone
  }
}
