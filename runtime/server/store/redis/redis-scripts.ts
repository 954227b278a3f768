import type { RedisClient } from "bun";
import { SCRIPT_SOURCES, type ScriptName } from "./redis-lua.ts";

/** SHA1 of each script, as EVALSHA names it: known here, so a script runs without a SCRIPT LOAD first. */
const SCRIPT_SHAS = Object.fromEntries(
  Object.entries(SCRIPT_SOURCES).map(([name, src]) => [name, new Bun.CryptoHasher("sha1").update(src).digest("hex")]),
) as Record<ScriptName, string>;

interface Retry {
  seq: number;
  name: ScriptName;
  argv: string[];
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Runs the store's Lua scripts by their SHA1, in the order run() is called. When the server lacks
 * a script (it restarted, or its script cache was flushed), every script is loaded once; the calls
 * that were sent meanwhile are answered first, then those that found a script missing are sent
 * again in their order, and only then the calls made while loading: a call never runs ahead of
 * one made before it.
 */
export class RedisScripts {
  #seq = 0;
  /** EVALSHAs sent and not yet answered. */
  #inFlight = 0;
  #drained: (() => void) | undefined;
  /** Set while the scripts are loaded again; new calls wait for it. */
  #reload: Promise<void> | undefined;
  readonly #retries: Retry[] = [];

  constructor(
    private readonly client: RedisClient,
    /** Arguments every script takes first (the key prefix and the retention settings). */
    private readonly common: (string | number)[],
  ) {}

  async run(name: ScriptName, args: (string | number)[]): Promise<any> {
    const argv = [...this.common, ...args].map(String);
    while (this.#reload) await this.#reload;
    return this.#send(name, argv);
  }

  /** Loads every script: at connect, and again when one is missing (so all or none are cached). */
  async loadAll(): Promise<void> {
    await Promise.all(Object.values(SCRIPT_SOURCES).map((src) => this.client.send("SCRIPT", ["LOAD", src])));
  }

  #send(name: ScriptName, argv: string[]): Promise<any> {
    const seq = ++this.#seq;
    this.#inFlight++;
    return this.client.send("EVALSHA", [SCRIPT_SHAS[name], "0", ...argv]).then(
      (reply) => {
        this.#answered();
        return reply;
      },
      (err) => {
        this.#answered();
        if (!String(err).includes("NOSCRIPT")) throw err;
        const { promise, resolve, reject } = Promise.withResolvers<unknown>();
        this.#retries.push({ seq, name, argv, resolve, reject });
        this.#reload ??= this.#reloadAll();
        return promise;
      },
    );
  }

  #answered(): void {
    if (--this.#inFlight > 0) return;
    const drained = this.#drained;
    this.#drained = undefined;
    drained?.();
  }

  async #reloadAll(): Promise<void> {
    let failure: unknown;
    try {
      await this.loadAll();
      // Calls sent before the reload answer first: those that found a script missing join the retries.
      if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    } catch (err) {
      failure = err;
    }
    const retries = this.#retries.splice(0).sort((a, b) => a.seq - b.seq);
    this.#reload = undefined;
    // Sent here, in their order, before the calls waiting on the reload resume.
    for (const r of retries) {
      if (failure) r.reject(failure);
      else this.#send(r.name, r.argv).then(r.resolve, r.reject);
    }
  }
}
