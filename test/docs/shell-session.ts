import type { Subprocess } from "bun";

/** One bash the reader types into: variables, `cd` and background jobs carry from one command to the next. */
export class ShellSession implements AsyncDisposable {
  readonly #proc: Subprocess<"pipe", "pipe", "pipe">;
  #out = "";
  #wake: () => void = () => {};
  #ended = false;

  constructor(cwd: string, env: Record<string, string | undefined> = process.env) {
    // A group of its own: disposing ends the shell and every job it left running.
    this.#proc = Bun.spawn(["bash"], { cwd, env, stdin: "pipe", stdout: "pipe", stderr: "pipe", detached: true });
    void this.#pump(this.#proc.stdout, true);
    void this.#pump(this.#proc.stderr, false);
  }

  /** What the shell wrote to stderr (reported when a command fails). */
  stderr = "";

  async #pump(stream: ReadableStream<Uint8Array>, isStdout: boolean): Promise<void> {
    const decoder = new TextDecoder();
    for await (const bytes of stream) {
      const text = decoder.decode(bytes, { stream: true });
      if (isStdout) this.#out += text;
      else this.stderr += text;
      this.#wake();
    }
    if (isStdout) this.#ended = true;
    this.#wake();
  }

  /** Runs one command (stdin closed, so it cannot read the commands after it): its stdout and exit status. */
  async run(command: string): Promise<{ code: number; output: string }> {
    const mark = `@@step-${crypto.randomUUID()}@@`;
    this.#proc.stdin.write(`{ ${command}\n} </dev/null\necho "${mark} $?"\n`);
    this.#proc.stdin.flush();
    const re = new RegExp(`${mark} (\\d+)\\n`);
    for (;;) {
      const m = re.exec(this.#out);
      if (m) {
        const output = this.#out.slice(0, m.index);
        this.#out = this.#out.slice(m.index + m[0].length);
        return { code: Number(m[1]), output };
      }
      if (this.#ended) return { code: -1, output: this.#out };
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      process.kill(-this.#proc.pid, "SIGKILL");
    } catch {
      // gone already
    }
    await this.#proc.exited;
  }
}

/** A long-running command the reader starts in a terminal of its own (a server), until Ctrl-C. */
export class Terminal implements AsyncDisposable {
  readonly #proc: Subprocess<"ignore", "pipe", "pipe">;
  readonly lines: string[] = [];
  #wake: () => void = () => {};
  #ended = false;

  constructor(command: string, cwd: string, env: Record<string, string | undefined> = process.env) {
    this.#proc = Bun.spawn(["bash", "-c", command], { cwd, env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
    void Promise.all([this.#pump(this.#proc.stdout), this.#pump(this.#proc.stderr)]).then(() => {
      this.#ended = true;
      this.#wake();
    });
  }

  async #pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const bytes of stream) {
      buf += decoder.decode(bytes, { stream: true });
      const parts = buf.split("\n");
      buf = parts.pop()!;
      this.lines.push(...parts);
      this.#wake();
    }
    if (buf) this.lines.push(buf);
  }

  /** The first printed line matching `pattern`, once it is printed. */
  async waitFor(pattern: RegExp): Promise<RegExpMatchArray> {
    for (;;) {
      for (const line of this.lines) {
        const m = line.match(pattern);
        if (m) return m;
      }
      if (this.#ended) throw new Error(`ended without printing ${pattern}:\n${this.lines.join("\n")}`);
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  /** Ctrl-C: SIGINT to the terminal's foreground group; what is left of it after its exit is killed. */
  async stop(): Promise<void> {
    this.#signal("SIGINT");
    // Bounded: a server that ignored Ctrl-C must not hang the test (it fails on its next step instead).
    let timer: Timer | undefined;
    await Promise.race([this.#proc.exited, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
    clearTimeout(timer);
    this.#signal("SIGKILL");
    await this.#proc.exited;
  }

  #signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.#proc.pid, signal);
    } catch {
      // the group is gone
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
