import type { RedisClient } from "bun";
import { DUTY_SCRIPTS } from "./redis-lua-duties.ts";
import { JOB_SCRIPTS } from "./redis-lua-jobs.ts";
import { EPILOGUE, PRELUDE } from "./redis-lua-prelude.ts";

export type ScriptName = keyof typeof JOB_SCRIPTS | keyof typeof DUTY_SCRIPTS;
const BODIES: Record<ScriptName, string> = { ...JOB_SCRIPTS, ...DUTY_SCRIPTS };

/** The Lua source EVALSHA runs for each script (what SCRIPT LOAD is sent). */
export const SCRIPT_SOURCES = Object.fromEntries(
  Object.entries(BODIES).map(([name, body]) => [name, PRELUDE + body + EPILOGUE]),
) as Record<ScriptName, string>;

/** SHA1 of each script, as EVALSHA names it: known here, so a script runs without a SCRIPT LOAD first. */
const SCRIPT_SHAS = Object.fromEntries(
  Object.entries(SCRIPT_SOURCES).map(([name, src]) => [name, new Bun.CryptoHasher("sha1").update(src).digest("hex")]),
) as Record<ScriptName, string>;

/** Runs the store's Lua scripts by their SHA1, loading a script only when the server lacks it. */
export class RedisScripts {
  constructor(
    private readonly client: RedisClient,
    /** Arguments every script takes first (the key prefix and the retention settings). */
    private readonly common: (string | number)[],
  ) {}

  async run(name: ScriptName, args: (string | number)[]): Promise<any> {
    const argv = [...this.common, ...args].map(String);
    try {
      return await this.client.send("EVALSHA", [SCRIPT_SHAS[name], "0", ...argv]);
    } catch (err) {
      if (!String(err).includes("NOSCRIPT")) throw err;
      // The redis-server restarted or lost its script cache: load them all, run again.
      await this.loadAll();
      return await this.client.send("EVALSHA", [SCRIPT_SHAS[name], "0", ...argv]);
    }
  }

  /**
   * Loads every script (done at connect, and again when one is missing). All or none are cached,
   * so a call never runs ahead of one sent before it that waits to load its script: calls of one
   * turn go out as a batch script and a one-call script, and must run in the order they came.
   */
  async loadAll(): Promise<void> {
    await Promise.all(Object.values(SCRIPT_SOURCES).map((src) => this.client.send("SCRIPT", ["LOAD", src])));
  }
}
