/**
 * Reads a child's pipe to its end, calling `onText` per decoded piece, so the child never blocks
 * on a full pipe.
 */
export async function drain(stream: ReadableStream<Uint8Array>, onText: (s: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

/** A buffer that keeps about the last `keep` characters added to it (for error reports). */
export function outputTail(keep = 50_000): { add: (s: string) => void; text: () => string } {
  let t = "";
  return {
    add: (s) => {
      t += s;
      if (t.length > keep * 2) t = t.slice(-keep);
    },
    text: () => t,
  };
}

/** Splits text arriving in pieces into whole lines, calling `onLine` for each. */
export function lineSplitter(onLine: (line: string) => void): (s: string) => void {
  let partial = "";
  return (s) => {
    const lines = (partial + s).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) onLine(line);
  };
}
