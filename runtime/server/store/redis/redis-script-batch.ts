import { BATCH_FORM } from "./redis-lua.ts";
import type { RedisScripts } from "./redis-scripts.ts";

/** Most calls in one script run, and about the most characters of their arguments. */
const BATCH_CALLS = 64;
const BATCH_CHARS = 1024 * 1024;

interface Call {
  now: number;
  args: string[];
  chars: number;
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Calls of one batched script (lua/enqueue.lua, finish.lua, claim.lua). A call made while none is in flight goes
 * out at once (no added wait: a lone worker or a runsync pays nothing); calls made while some are
 * in flight wait for the end of the event loop's turn and go together, as one run of the batch
 * form (up to 64, or about 1 MB of arguments each: one round trip and one script run for all of
 * them). Calls run in the order they were made, each answered with its own reply; a call's
 * {'error', message} (a Redis error in a batch, or a bad argument) rejects it with that message.
 */
export class ScriptBatch {
  readonly #waiting: Call[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(
    private readonly scripts: RedisScripts,
    private readonly name: keyof typeof BATCH_FORM,
  ) {}

  /** The script's reply to this call, run at `now` with `args`. */
  run(now: number, args: string[]): Promise<any> {
    let chars = 0;
    for (const a of args) chars += a.length;
    const { promise, resolve, reject } = Promise.withResolvers<unknown>();
    this.#waiting.push({ now, args, chars, resolve, reject });
    if (this.#inFlight === 0 && !this.#scheduled) this.#sendWaiting();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#sendWaiting();
      });
    }
    return promise;
  }

  /** Sends every waiting call, in runs of up to 64 calls or about 1 MB. */
  #sendWaiting(): void {
    while (this.#waiting.length) {
      let n = 1;
      let chars = this.#waiting[0]!.chars;
      while (n < this.#waiting.length && n < BATCH_CALLS && chars + this.#waiting[n]!.chars <= BATCH_CHARS)
        chars += this.#waiting[n++]!.chars;
      this.#send(this.#waiting.splice(0, n));
    }
  }

  #send(calls: Call[]): void {
    this.#inFlight++;
    const sent: Promise<unknown[]> =
      calls.length === 1
        ? this.scripts.run(this.name, [calls[0]!.now, ...calls[0]!.args]).then((r) => [r])
        : this.scripts.run(BATCH_FORM[this.name], [calls.at(-1)!.now, ...calls.flatMap((c) => [c.now, ...c.args])]);
    sent.then(
      (replies) => {
        this.#inFlight--;
        if (!Array.isArray(replies) || replies.length !== calls.length) {
          const error = new Error(
            `${BATCH_FORM[this.name]} answered ${Array.isArray(replies) ? replies.length : typeof replies} replies to ${calls.length} calls`,
          );
          return calls.forEach((c) => c.reject(error));
        }
        calls.forEach((c, i) => settle(c, replies[i] ?? null));
      },
      (error) => {
        this.#inFlight--;
        calls.forEach((c) => c.reject(error));
      },
    );
  }
}

/** Answers a call with its reply, or rejects it when the reply is {'error', message}. */
function settle(call: Call, reply: unknown): void {
  if (Array.isArray(reply) && reply.length === 2 && reply[0] === "error") call.reject(new Error(String(reply[1])));
  else call.resolve(reply);
}
