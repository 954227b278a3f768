/** The last few kilobytes of a process's output, copied on to another stream as they come. */
export class OutputTail {
  #text = "";
  readonly #max: number;

  constructor(maxChars = 4000) {
    this.#max = maxChars;
  }

  /** Copies `from` to `to`, keeping its tail (and giving each whole line to `onLine`); resolves when `from` ends. */
  async copy(from: ReadableStream<Uint8Array>, to: { write(chunk: Uint8Array): unknown }, onLine?: (line: string) => void): Promise<void> {
    const decoder = new TextDecoder();
    let partial = "";
    try {
      for await (const chunk of from) {
        to.write(chunk);
        const text = decoder.decode(chunk, { stream: true });
        this.#text = (this.#text + text).slice(-this.#max);
        if (!onLine) continue;
        const lines = (partial + text).split("\n");
        partial = lines.pop()!;
        for (const line of lines) if (line) onLine(line);
      }
    } catch {
      // The pipe broke with the process: what came before is kept.
    }
    if (partial) onLine?.(partial);
  }

  /** The last lines kept (the first, cut, line dropped). */
  text(): string {
    const t = this.#text;
    if (t.length < this.#max) return t.trimEnd();
    const nl = t.indexOf("\n");
    return (nl === -1 ? t : t.slice(nl + 1)).trimEnd();
  }
}
