import { BATCH_FORM } from "./redis-lua-batched.ts";
import type { RedisScripts } from "./redis-scripts.ts";

/** Most calls in one script run, and about the most characters of their arguments. */
const BATCH_CALLS = 64;
const BATCH_BYTES = 1024 * 1024;

interface Call {
  now: number;
  args: string[];
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Calls of one batched script (redis-lua-batched.ts) that arrive in the same turn of the event
 * loop go to Redis as one run of its batch form: one round trip and one script run for all of
 * them (up to 64, or about 1 MB of arguments), run in the order they came, each answered with
 * its own reply. A call alone runs the one-call form.
 */
export class ScriptBatch {
  #calls: Call[] = [];
  #bytes = 0;

  constructor(
    private readonly scripts: RedisScripts,
    private readonly name: keyof typeof BATCH_FORM,
  ) {}

  /** The script's reply to this call, run at `now` with `args`. */
  run(now: number, args: string[]): Promise<any> {
    let bytes = 0;
    for (const a of args) bytes += a.length;
    if (this.#calls.length && (this.#calls.length >= BATCH_CALLS || this.#bytes + bytes > BATCH_BYTES)) this.#flush();
    const { promise, resolve, reject } = Promise.withResolvers<unknown>();
    this.#calls.push({ now, args, resolve, reject });
    this.#bytes += bytes;
    if (this.#calls.length === 1) setImmediate(this.#flush);
    return promise;
  }

  readonly #flush = (): void => {
    const calls = this.#calls;
    if (!calls.length) return;
    this.#calls = [];
    this.#bytes = 0;
    const sent: Promise<unknown[]> =
      calls.length === 1
        ? this.scripts.run(this.name, [calls[0]!.now, ...calls[0]!.args]).then((r) => [r])
        : this.scripts.run(BATCH_FORM[this.name], [calls.at(-1)!.now, ...calls.flatMap((c) => [c.now, ...c.args])]);
    sent.then(
      (replies) => {
        if (!Array.isArray(replies) || replies.length !== calls.length) {
          const error = new Error(`${BATCH_FORM[this.name]} answered ${Array.isArray(replies) ? replies.length : typeof replies} replies to ${calls.length} calls`);
          return calls.forEach((c) => c.reject(error));
        }
        calls.forEach((c, i) => c.resolve(replies[i] ?? null));
      },
      (error) => calls.forEach((c) => c.reject(error)),
    );
  };
}
