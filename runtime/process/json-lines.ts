/** A line longer than this is not a message of the protocol: it is dropped, never buffered whole. */
export const MAX_LINE_CHARS = 64 * 1024;

/**
 * Feeds each JSON line of `input` to `onMessage` until the stream ends; other lines are skipped,
 * and so is a line longer than MAX_LINE_CHARS (a process writing without end never grows this
 * side's memory).
 */
export async function readJsonLines(input: ReadableStream<Uint8Array>, onMessage: (m: unknown) => void): Promise<void> {
  let buf = "";
  let skipping = false;
  const decoder = new TextDecoder();
  try {
    for await (const bytes of input) {
      buf += decoder.decode(bytes, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const line of lines) {
        if (skipping) {
          skipping = false; // the rest of an over-long line
          continue;
        }
        if (line.length > MAX_LINE_CHARS) continue;
        let message: unknown;
        try {
          message = JSON.parse(line);
        } catch {
          continue; // not a message
        }
        onMessage(message);
      }
      if (buf.length > MAX_LINE_CHARS) {
        buf = "";
        skipping = true;
      }
    }
  } catch {
    // the other side is gone
  }
}
